"""harness - a real nats-server and the real lanesched daemon for the tests, on free loopback
ports, with their data and logs in a temporary directory that stop() removes.

Invariants:
  1. Every child is killed when the test process exits, however it exits (atexit).
  2. The daemon counts as started once it answers P.stats; SIGTERM must make it exit 0 (a clean
     shutdown, and no leak report under ASan).
  3. Binaries: LANESCHED_BIN (CTest passes the built daemon), else ../../../build/bin/lanesched;
     NATS_SERVER, else nats-server on PATH.
  4. Children never inherit LD_PRELOAD: it is there (ASan builds) for this interpreter only.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import lanesched

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
_alive: "set[subprocess.Popen]" = set()


@atexit.register
def _kill_all() -> None:
    for p in list(_alive):
        p.kill()


def child_env() -> dict:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # invariant 4
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon_bin() -> str:
    p = os.environ.get("LANESCHED_BIN") or str(ROOT / "build" / "bin" / "lanesched")
    if not os.path.exists(p):
        raise RuntimeError(f"lanesched binary not found at {p}: build it, or set LANESCHED_BIN")
    return p


def until(cond, seconds: float, what: str):
    end = time.monotonic() + seconds
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.02)


class Env:
    """nats-server and (unless daemon=False) lanesched with flags."""

    def __init__(self, flags: Optional[List[str]] = None, daemon: bool = True, nats_config: str = "") -> None:
        self.dir = tempfile.mkdtemp(prefix="lanes-py-")
        self.data_dir = os.path.join(self.dir, "data")
        self.prefix = "lanes"
        self.flags = flags or []
        self.nats: Optional[subprocess.Popen] = None
        self.daemon: Optional[subprocess.Popen] = None
        self.daemon_log = os.path.join(self.dir, "lanesched.log")
        self._probe: Optional[lanesched.Client] = None
        try:
            self._nats_start(nats_config)
            if daemon:
                self.daemon_start()
        except BaseException:
            self.stop(keep=True)
            raise

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _spawn(self, argv: List[str], log: str) -> subprocess.Popen:
        with open(log, "ab") as f:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f, env=child_env())
        _alive.add(p)
        return p

    def _nats_start(self, conf_text: str) -> None:
        argv_extra = []
        if conf_text:
            conf = os.path.join(self.dir, "nats.conf")
            Path(conf).write_text(conf_text + "\n")
            argv_extra = ["-c", conf]
        for _ in range(5):
            self.port = free_port()
            p = self._spawn([os.environ.get("NATS_SERVER", "nats-server"), "-a", "127.0.0.1", "-p", str(self.port)] + argv_extra,
                            os.path.join(self.dir, "nats.log"))
            end = time.monotonic() + 5
            while p.poll() is None and time.monotonic() < end:
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                    self.nats = p
                    return
                except OSError:
                    time.sleep(0.02)
            p.kill()
            p.wait()
            _alive.discard(p)
        raise RuntimeError("nats-server did not start: " + self.tail(os.path.join(self.dir, "nats.log")))

    def client(self, **opts) -> lanesched.Client:
        return lanesched.connect(self.url, prefix=self.prefix, **opts)

    def daemon_start(self, flags: Optional[List[str]] = None) -> None:
        if self.daemon is not None:
            raise RuntimeError("the daemon is already running")
        argv = [daemon_bin(), "--server", self.url, "--prefix", self.prefix, "--data-dir", self.data_dir]
        self.daemon = self._spawn(argv + (self.flags if flags is None else flags), self.daemon_log)
        if self._probe is None:
            self._probe = self.client()
        end = time.monotonic() + 20
        while True:
            if self.daemon.poll() is not None:
                raise RuntimeError(f"lanesched exited at start ({self.daemon.returncode}): {self.tail(self.daemon_log)}")
            try:
                self._probe.request(f"{self.prefix}.stats", b"", 0.5)
                return
            except lanesched.LanesError:
                if time.monotonic() > end:
                    raise RuntimeError("lanesched not answering: " + self.tail(self.daemon_log))
                time.sleep(0.05)

    def daemon_stop(self, sig: int = signal.SIGTERM) -> int:
        d, self.daemon = self.daemon, None
        if d is None:
            return 0
        d.send_signal(sig)
        try:
            rc = d.wait(30)
        except subprocess.TimeoutExpired:
            d.kill()
            rc = d.wait()
        _alive.discard(d)
        if sig == signal.SIGTERM and rc != 0:
            raise AssertionError(f"lanesched exited {rc} at SIGTERM: {self.tail(self.daemon_log)}")
        return rc

    def stats(self) -> dict:
        assert self._probe is not None
        return self._probe.stats()

    def tail(self, path: str, lines: int = 40) -> str:
        try:
            return "\n" + "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, keep: bool = False) -> None:
        err = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        try:
            self.daemon_stop()
        except AssertionError as e:
            err = e
        if self.nats is not None:
            self.nats.terminate()
            self.nats.wait(10)
            _alive.discard(self.nats)
            self.nats = None
        if keep or err or os.environ.get("LANES_TEST_KEEP"):
            print(f"lanes test directory kept: {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        if err:
            raise err

"""matrix.py - the interoperability matrix: producers in C, Node, Python and Go, each against
consumers in each language (16 pairs), on one real nats-server and one daemon. Pair (P, C) has a
model of its own, "mx.<P>.<C>", so the pairs run at once; every pair must end with
  items produced = items consumed = the daemon's items received = items completed,
  tokens produced = tokens consumed = the daemon's tokens received = tokens completed
(per model, from P.metrics), and no item that the consumer found altered (README.md beside this
file: the payload, reply_to and shape each item must carry).

    python3 tests/interop/matrix.py --lanesched build/bin/lanesched --c-peer build/bin/interop_peer
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))
import harness  # noqa: E402

LANGS = ("c", "node", "python", "go")


def peer_argv(lang: str, a: argparse.Namespace, go_bin: str) -> list:
    here = Path(__file__).resolve().parent
    return {
        "c": [a.c_peer],
        "node": [a.node, str(here / "peer.mjs")],
        "python": [sys.executable, str(here / "peer.py")],
        "go": [go_bin],
    }[lang]


def env_for(lang: str) -> dict:
    # Only Python loads the (possibly ASan-built) C client into an interpreter that needs the
    # runtime preloaded; everything else must not inherit LD_PRELOAD.
    env = dict(os.environ)
    if lang != "python":
        env.pop("LD_PRELOAD", None)
    return env


def metrics_by_model(text: str) -> dict:
    out: dict = {}
    pat = re.compile(r'^lanesched_(items|tokens)_(received|completed)_total\{model="([^"]+)"\} (\d+)', re.M)
    for kind, what, model, v in pat.findall(text):
        out.setdefault(model, {})[f"{kind}_{what}"] = int(v)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lanesched", default=os.environ.get("LANESCHED_BIN", str(ROOT / "build/bin/lanesched")))
    p.add_argument("--c-peer", default=str(ROOT / "build/bin/interop_peer"))
    p.add_argument("--node", default="node")
    p.add_argument("--go", default="go")
    p.add_argument("--count", type=int, default=25, help="items per pair")
    p.add_argument("--langs", default=",".join(LANGS))
    p.add_argument("--timeout-s", type=float, default=60)
    a = p.parse_args()
    os.environ["LANESCHED_BIN"] = a.lanesched
    langs = a.langs.split(",")
    t0 = time.monotonic()

    tmp = tempfile.mkdtemp(prefix="lanes-interop-")
    go_bin = os.path.join(tmp, "interop_peer_go")
    if "go" in langs:
        r = subprocess.run([a.go, "build", "-o", go_bin, "./cmd/interop-peer"], cwd=ROOT / "clients" / "go",
                           env={"GOFLAGS": "-mod=vendor", "GOPROXY": "off", **env_for("go")}, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"interop: go build failed:\n{r.stderr}")
            return 1
    build_s = time.monotonic() - t0

    env = harness.Env()
    failed = 0
    try:
        procs = []
        for c in langs:  # consumers first: they register while the producers start
            models = ",".join(f"mx.{pl}.{c}" for pl in langs)
            argv = peer_argv(c, a, go_bin) + ["consume", "--server", env.url, "--models", models,
                                              "--count", str(a.count), "--timeout-s", str(a.timeout_s)]
            procs.append(("consume", c, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(c))))
        for pl in langs:
            models = ",".join(f"mx.{pl}.{c}" for c in langs)
            argv = peer_argv(pl, a, go_bin) + ["produce", "--server", env.url, "--models", models,
                                               "--count", str(a.count), "--seed", str(1 + langs.index(pl))]
            procs.append(("produce", pl, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(pl))))
        reports: dict = {"produce": {}, "consume": {}}
        for role, lang, proc in procs:
            try:
                out, err = proc.communicate(timeout=a.timeout_s + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            lines = [ln for ln in out.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                print(f"interop: {lang} {role} exited {proc.returncode}:\n{err[-2000:]}")
                failed += 1
                continue
            reports[role].update(json.loads(lines[-1])["models"])
        daemon = metrics_by_model(env._probe.metrics())
    finally:
        env.stop()

    print(f"{'producer':<9}{'consumer':<9}{'items':>6}{'consumed':>9}{'completed':>10}"
          f"{'tokens':>8}{'received':>9}{'consumed':>9}{'completed':>10}{'bad':>5}  verdict")
    pairs_ok = 0
    totals = [0, 0, 0]
    for pl in langs:
        for c in langs:
            m = f"mx.{pl}.{c}"
            pr = reports["produce"].get(m, {})
            co = reports["consume"].get(m, {})
            d = daemon.get(m, {})
            row = [pr.get("items", -1), co.get("items", -1), d.get("items_completed", -1), pr.get("tokens", -1),
                   d.get("tokens_received", -1), co.get("tokens", -1), d.get("tokens_completed", -1), co.get("bad", -1)]
            ok = (row[0] == a.count == row[1] == row[2] == d.get("items_received", -1)
                  and row[3] == row[4] == row[5] == row[6] and row[7] == 0 and pr.get("rejected", 0) == 0)
            pairs_ok += ok
            if ok:
                totals = [totals[0] + row[0], totals[1] + row[4], totals[2] + row[6]]
            print(f"{pl:<9}{c:<9}{row[0]:>6}{row[1]:>9}{row[2]:>10}{row[3]:>8}{row[4]:>9}{row[5]:>9}{row[6]:>10}{row[7]:>5}  "
                  f"{'ok' if ok else 'FAIL'}")
    n = len(langs) ** 2
    print(f"interop: {n} pairs, {totals[0]} items, tokens received {totals[1]} = completed {totals[2]}; "
          f"go build {build_s:.1f} s, total {time.monotonic() - t0:.1f} s")
    print(f"{pairs_ok} passed, {n - pairs_ok} failed")
    return 0 if pairs_ok == n and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

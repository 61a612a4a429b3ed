"""client - one NATS connection used as a lanesched client: the producer's calls, consumers,
plain messages (results on reply_to subjects, P.stats) and the connection's options.

Invariants:
  1. Every subject under the prefix is f"{prefix}.{verb}[.{rest}]"; consumer subjects are never
     built here: a consumer uses the four the daemon's Registered names.
  2. Options are keyword arguments; an unknown one is a TypeError, never ignored.
  3. close() closes every consumer and subscription made on the client first (consumers with Bye
     unless told otherwise), then the connection, whose memory the C objects borrow; every call
     after it raises LanesError("closed").

Rejected: a connection per consumer (NATS multiplexes; one per process is the norm).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from . import _native
from .errors import LanesError, from_status

if TYPE_CHECKING:
    from .consumer import Consumer
    from .producer import Producer, SubmitResult

lib = _native.lib
OK = _native.STATUS["LC_OK"]

DEFAULT_SERVER = "nats://127.0.0.1:4222"
DEFAULT_PREFIX = "lanes"

Data = Union[bytes, bytearray, memoryview, str]


def _enc(s: Optional[str]) -> Optional[bytes]:
    return None if s is None or s == "" else s.encode("utf-8")


def _data(d: Optional[Data]) -> bytes:
    if d is None:
        return b""
    if isinstance(d, str):
        return d.encode("utf-8")
    return bytes(d)


@dataclass(frozen=True)
class Msg:
    """A message from a subscription: its subject and body."""

    subject: str
    data: bytes


class Subscription:
    """A subscription's messages, read with next() or by iterating (until close())."""

    def __init__(self, client: "Client", subject: str) -> None:
        self._client = client
        self.subject = subject
        h = ctypes.c_void_p()
        st = lib.lc_sub_open(client._handle(), subject.encode(), ctypes.byref(h))
        if st != OK:
            raise from_status(st, client._error())
        self._h: Optional[ctypes.c_void_p] = h
        self._lock = threading.Lock()
        client._track(self)

    def next(self, timeout: float = 1.0) -> Optional[Msg]:
        """The next message, or None after timeout seconds."""
        with self._lock:
            if self._h is None:
                raise LanesError("closed", f"subscription {self.subject}")
            subj, data, n = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
            st = lib.lc_sub_next(self._h, int(timeout * 1000), ctypes.byref(subj), ctypes.byref(data), ctypes.byref(n))
        if st == _native.STATUS["LC_ETIMEOUT"]:
            return None
        if st != OK:
            raise from_status(st, self._client._error())
        return Msg(_native.take_str(subj), _native.take_bytes(data, n.value))

    def __iter__(self):
        while self._h is not None:
            m = self.next(0.25)
            if m is not None:
                yield m

    def close(self) -> None:
        with self._lock:
            if self._h is not None:
                lib.lc_sub_close(self._h)
                self._h = None
        self._client._untrack(self)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Client:
    """A connection to NATS speaking lanesched's contract (subjects.md). See connect()."""

    def __init__(
        self,
        servers: Union[str, Sequence[str], None] = None,
        *,
        prefix: Optional[str] = None,
        inbox_prefix: Optional[str] = None,
        name: Optional[str] = "lanesched-python",
        user: Optional[str] = None,
        password: Optional[str] = None,
        token: Optional[str] = None,
        creds_file: Optional[str] = None,
        tls: bool = False,
        tls_ca_file: Optional[str] = None,
        tls_cert_file: Optional[str] = None,
        tls_key_file: Optional[str] = None,
        connect_timeout: float = 0.0,
        nats_flusher: bool = False,
    ) -> None:
        if servers is None:
            servers = os.environ.get("LANESCHED_SERVER", DEFAULT_SERVER)
        if not isinstance(servers, str):
            servers = ",".join(servers)
        self.prefix = prefix or os.environ.get("LANESCHED_PREFIX", DEFAULT_PREFIX)
        self.inbox_prefix = inbox_prefix
        cfg = _native.ClientConfig()
        lib.lc_client_config_init(ctypes.byref(cfg))
        keep = [_enc(servers), _enc(self.prefix), _enc(name), _enc(user), _enc(password), _enc(token)]
        keep += [_enc(creds_file), _enc(tls_ca_file), _enc(tls_cert_file), _enc(tls_key_file), _enc(inbox_prefix)]
        (cfg.servers, cfg.prefix, cfg.name, cfg.user, cfg.password, cfg.token) = keep[:6]
        (cfg.creds_file, cfg.tls_ca_file, cfg.tls_cert_file, cfg.tls_key_file, cfg.inbox_prefix) = keep[6:]
        cfg.tls = bool(tls)
        cfg.connect_timeout_ms = int(connect_timeout * 1000)
        cfg.nats_flusher = bool(nats_flusher)
        err = ctypes.create_string_buffer(256)
        h = ctypes.c_void_p()
        st = lib.lc_client_open(ctypes.byref(cfg), err, len(err), ctypes.byref(h))
        if st != OK:
            raise from_status(st, err.value.decode("utf-8", "replace"))
        self._h: Optional[ctypes.c_void_p] = h
        self._consumers: "set[Any]" = set()
        self._subs: "set[Subscription]" = set()
        self._lock = threading.Lock()

    # ---- plumbing ---------------------------------------------------------------------------

    def _handle(self) -> ctypes.c_void_p:
        if self._h is None:
            raise LanesError("closed", "the client is closed")
        return self._h

    def _error(self) -> str:
        return lib.lc_client_error_get(self._h).decode("utf-8", "replace") if self._h else ""

    def subject(self, *parts: str) -> str:
        """f"{prefix}.{parts joined by '.'}" (invariant 1)."""
        return ".".join((self.prefix,) + parts)

    @property
    def max_payload(self) -> int:
        """The server's max_payload: the largest message NATS carries."""
        return int(lib.lc_client_max_payload_get(self._handle()))

    # ---- plain messages ---------------------------------------------------------------------

    def publish(self, subject: str, data: Optional[Data] = None) -> None:
        """Publishes data on subject (core NATS: at most once)."""
        b = _data(data)
        st = lib.lc_msg_publish(self._handle(), subject.encode(), b, len(b))
        if st != OK:
            raise from_status(st, self._error())

    def flush(self, timeout: float = 1.0) -> None:
        """Waits until the server has everything published so far."""
        st = lib.lc_client_flush(self._handle(), max(1, int(timeout * 1000)))
        if st != OK:
            raise from_status(st, self._error())

    def request(self, subject: str, data: Optional[Data] = None, timeout: float = 2.0) -> bytes:
        """One request, one reply's body; LanesError timeout / no_responders otherwise."""
        b = _data(data)
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        st = lib.lc_msg_request(self._handle(), subject.encode(), b, len(b), max(1, int(timeout * 1000)), ctypes.byref(out), ctypes.byref(n))
        if st != OK:
            raise from_status(st, self._error())
        return _native.take_bytes(out, n.value)

    def new_inbox(self) -> str:
        """A fresh subject under the inbox prefix, e.g. for an item's reply_to."""
        out = ctypes.c_void_p()
        st = lib.lc_msg_inbox_make(self._handle(), ctypes.byref(out))
        if st != OK:
            raise from_status(st, self._error())
        return _native.take_str(out)

    def subscribe(self, subject: str) -> Subscription:
        """A subscription on subject (wildcards allowed); read it with next() or iterate it."""
        return Subscription(self, subject)

    def stats(self, detail: Optional[dict] = None, timeout: float = 2.0) -> dict:
        """P.stats as a dict (the first instance to answer); detail: a page request."""
        body = json.dumps(detail) if detail else ""
        data = self.request(self.subject("stats"), body, timeout)
        try:
            return json.loads(data)
        except ValueError as err:
            raise LanesError("bad_reply", "P.stats did not answer JSON") from err

    def metrics(self, timeout: float = 2.0) -> str:
        """P.metrics: the Prometheus text."""
        return self.request(self.subject("metrics"), b"", timeout).decode()

    # ---- producer and consumers -------------------------------------------------------------

    def producer(self, **opts: Any) -> "Producer":
        """A Producer on this connection (options: see Producer)."""
        from .producer import Producer

        return Producer(self, **opts)

    def submit(self, model: str, items: Sequence[Any], **opts: Any) -> "SubmitResult":
        """Producer(self, **opts).submit(model, items)."""
        return self.producer(**opts).submit(model, items)

    def consumer(self, model: str, **opts: Any) -> "Consumer":
        """Registers a Consumer of model (options: see Consumer)."""
        from .consumer import Consumer

        c = Consumer(self, model, **opts)
        with self._lock:
            self._consumers.add(c)
        return c

    def _forget(self, consumer: Any) -> None:
        with self._lock:
            self._consumers.discard(consumer)

    def _track(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.add(sub)

    def _untrack(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    def close(self, bye: bool = True) -> None:
        """Closes every consumer (Bye unless bye=False) and subscription, then the connection
        (invariant 3)."""
        with self._lock:
            consumers = list(self._consumers)
            subs = list(self._subs)
        for c in consumers:
            c.close(bye=bye)
        for sub in subs:
            sub.close()
        with self._lock:
            h, self._h = self._h, None
        if h is not None:
            lib.lc_client_close(h)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_h", None) is not None and not self._consumers:
                self.close(bye=False)
        except Exception:
            pass


def connect(servers: Union[str, Sequence[str], None] = None, **opts: Any) -> Client:
    """Opens a Client. servers: "nats://host:port" (a comma list or a sequence for several;
    default env LANESCHED_SERVER or nats://127.0.0.1:4222). Options: prefix (default env
    LANESCHED_PREFIX or "lanes"), inbox_prefix (replies and batches arrive under it; default
    nats.c's "_INBOX"), name, user, password, token, creds_file, tls, tls_ca_file, tls_cert_file,
    tls_key_file, connect_timeout (seconds), nats_flusher (True: nats.c's flusher thread gathers
    writes, holding each message up to 1 ms; default False: each is written when sent, so a
    worker's pull never waits there). Unknown options are a TypeError."""
    return Client(servers, **opts)


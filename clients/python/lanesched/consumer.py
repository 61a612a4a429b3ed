"""consumer - a lanesched consumer over the C client's: register, pulls kept outstanding,
heartbeats from the C client's own thread, acks, bye, and registering again when the daemon no
longer knows it (subjects.md, "Consumer life cycle").

Invariants:
  1. The consumer's four subjects are the ones the daemon's Registered names (the C client keeps
     them); nothing here builds one from the consumer id.
  2. Every call on the C consumer is made under one lock (the C consumer is driven by one thread
     at a time); next() waits in slices of at most SLICE_S so that acks from other threads get
     their turn, and yields the lock to them between slices.
  3. A pull that ends without any message (lost past its expiry) or with the server's
     no-responders status is a lost pull: the consumer asks whether the daemon still knows it
     (an Ack for batch 0: unknown_batch = known) and registers again on unknown_consumer or no
     answer. unknown_consumer from a pull or an ack registers again at once, unless the
     registration it ends is younger than REREGISTER_CALM_S: then it waits first (0.2 s, doubling
     to 5 s), so a daemon that forgets every registration at once (a misconfiguration, a hostile
     responder) gets a registration every few seconds, not a loop of them. Registering again
     retries with backoff until it succeeds or the consumer is closed.
  4. Every delivered batch is named by the heartbeats (C client's in-progress set) until it is
     settled, released, or the daemon says it is no longer this consumer's.
  5. After close() nothing is sent except the Bye, and next() returns None; close() returns
     only once the C consumer is freed, from whichever thread calls it (the client's close frees
     the connection the C consumer borrows right after).

Rejected: heartbeats from a Python thread (a long computation holding the GIL would starve them;
the C client's thread needs no GIL); one pull with `prefetch` credits (a single lost message
would leave no pull out: the C client tops credits up as they are used).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable, Iterable, Iterator, List, Optional

from . import _native
from .errors import LanesError, daemon_word, from_status
from .shape import check_model

if TYPE_CHECKING:
    from .client import Client

lib = _native.lib
S = _native.STATUS
log = logging.getLogger("lanesched")

# next()'s wait per call into the C client: short enough that an ack from another thread waits
# at most this long for the lock, long enough that an idle consumer costs nothing.
SLICE_S = 0.25
# After an ERROR batch other than unknown_consumer (too_many_pulls, publish_failed): a pause
# before pulling again, so a refused pull does not turn into a busy loop.
ERROR_PAUSE_S = 1.0
# A registration that lived this long ends without delaying the next (invariant 3).
REREGISTER_CALM_S = 10.0
# The highest protocol version this package speaks (subjects.md, "Protocol version").
PROTOCOL_VERSION = 1
U32 = 0xFFFFFFFF


@dataclass(frozen=True)
class BatchItem:
    """One item of a batch: the producer's id and payload, its tokens, where its result goes
    (reply_to), how often it was delivered (> 1: seen before) and the tokens of its shape's
    cacheable prefix as the producer declared them (0 = unknown)."""

    id: bytes
    tokens: int
    payload: bytes
    reply_to: str
    deliveries: int
    prefix_tokens: int = 0


@dataclass(frozen=True)
class AckReply:
    """The daemon's AckReply: code is "" when it carried no error, else its word
    (unknown_batch: already settled or returned, do not retry; unknown_position: nothing
    changed; unknown_consumer: the consumer registers again)."""

    acked: int = 0
    returned: int = 0
    unknown: int = 0
    code: str = ""
    error: str = ""


@dataclass(frozen=True)
class Registration:
    consumer_id: str
    pull_subject: str
    ack_subject: str
    heartbeat_subject: str
    bye_subject: str
    heartbeat_ms: int
    dead_after_ms: int
    ack_wait_ms: int


class Batch:
    """A delivered batch: items of one model and one shape, padded to pad_to. Settle it with
    ack() (every position), settle(ack=[..], nak=[..]) (0-based positions), nak(positions=all);
    extend it with in_progress(); release() stops the heartbeats naming it. Each has an
    *_async twin for asyncio."""

    def __init__(self, consumer: "Consumer", raw: _native.Batch) -> None:
        self._consumer = consumer
        self.batch_id: int = int(raw.batch_id)
        self.model: str = raw.model.decode("utf-8", "replace")
        self.signature: int = int(raw.signature)
        self.lane: int = int(raw.lane)
        self.pad_to: int = int(raw.pad_to)
        self.items: List[BatchItem] = [
            BatchItem(
                _native.view(raw.items[i].id),
                int(raw.items[i].tokens),
                _native.view(raw.items[i].payload),
                (raw.items[i].reply_to or b"").decode("utf-8", "replace"),
                int(raw.items[i].deliveries),
                int(raw.items[i].prefix_tokens),
            )
            for i in range(raw.n_items)
        ]
        self.settled: set = set()
        self.done = False

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[BatchItem]:
        return iter(self.items)

    def __repr__(self) -> str:
        return f"Batch(id={self.batch_id}, model={self.model!r}, items={len(self.items)}, pad_to={self.pad_to})"

    def ack(self, timeout: Optional[float] = None) -> AckReply:
        """Completes every unsettled position (Ack.all)."""
        return self._consumer._ack(self, all=True, timeout=timeout)

    def settle(self, ack: Iterable[int] = (), nak: Iterable[int] = (), timeout: Optional[float] = None) -> AckReply:
        """Acks and naks by position; naked items are delivered again."""
        return self._consumer._ack(self, ack=list(ack), nak=list(nak), timeout=timeout)

    def nak(self, positions: Optional[Iterable[int]] = None, timeout: Optional[float] = None) -> AckReply:
        """Returns positions (default: all) for redelivery."""
        ps = list(range(len(self.items))) if positions is None else list(positions)
        return self._consumer._ack(self, nak=ps, timeout=timeout)

    def in_progress(self, timeout: Optional[float] = None) -> AckReply:
        """Extends the ack deadline by ack_wait_ms (Ack.in_progress); settles nothing."""
        return self._consumer._ack(self, in_progress=True, timeout=timeout)

    def release(self) -> None:
        """Stops naming this batch in heartbeats: unless settled, the daemon returns it after
        ack_wait_ms (for work given up on)."""
        self._consumer._release(self)

    async def ack_async(self, timeout: Optional[float] = None) -> AckReply:
        return await asyncio.to_thread(self.ack, timeout)

    async def settle_async(self, ack: Iterable[int] = (), nak: Iterable[int] = (), timeout: Optional[float] = None) -> AckReply:
        return await asyncio.to_thread(self.settle, list(ack), list(nak), timeout)

    async def nak_async(self, positions: Optional[Iterable[int]] = None, timeout: Optional[float] = None) -> AckReply:
        return await asyncio.to_thread(self.nak, None if positions is None else list(positions), timeout)

    async def in_progress_async(self, timeout: Optional[float] = None) -> AckReply:
        return await asyncio.to_thread(self.in_progress, timeout)


def _u32(name: str, v: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= U32:
        raise ValueError(f"{name} must be an integer in 0..{U32}, not {v!r}")
    return v


class Consumer:
    """Registers with the packing contract and yields batches as work arrives.

    Required: model, max_batch_size, max_batch_tokens. Options: max_input_tokens (0 = unlimited),
    name (for people); the worker's declared cost and cache (subjects.md, P.register.<model>):
    batch_fixed_us (fixed cost per batch, microseconds), token_ns (per padded token, nanoseconds),
    cache_shapes (prompt shapes its prefix cache keeps warm; 0 = 1) - all 0: the daemon estimates
    the cost; prefetch (batches kept requested ahead, >= 1; 2), pull_expires_ms (each pull's wait;
    5000), heartbeat_ms (None: the daemon's; 0: none), ack_timeout (seconds per Ack, Bye and probe
    attempt; 2.0), ack_retries (more attempts; 2), register_retry_for (how long the first
    registration is retried while no daemon answers; 30.0), on_warning (called with each LanesError
    the consumer rides out; default: logged). Unknown options are a TypeError.
    """

    def __init__(
        self,
        client: "Client",
        model: str,
        *,
        max_batch_size: int,
        max_batch_tokens: int,
        max_input_tokens: int = 0,
        name: str = "",
        batch_fixed_us: int = 0,
        token_ns: int = 0,
        cache_shapes: int = 0,
        prefetch: int = 2,
        pull_expires_ms: int = 5000,
        heartbeat_ms: Optional[int] = None,
        ack_timeout: float = 2.0,
        ack_retries: int = 2,
        register_retry_for: float = 30.0,
        on_warning: Optional[Callable[[LanesError], None]] = None,
    ) -> None:
        self.client = client
        self.model = model
        m = check_model(model)
        if max_batch_size == 0:
            raise LanesError("zero_batch_size", "max_batch_size must be greater than zero")
        if max_batch_tokens == 0:
            raise LanesError("zero_batch_tokens", "max_batch_tokens must be greater than zero")
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        self._on_warning = on_warning
        self._keep = [m, name.encode("utf-8")]
        cfg = _native.ConsumerConfig()
        lib.lc_consumer_config_init(ctypes.byref(cfg))
        cfg.model = m
        cfg.name = self._keep[1]
        cfg.max_batch_size = _u32("max_batch_size", max_batch_size)
        cfg.max_batch_tokens = _u32("max_batch_tokens", max_batch_tokens)
        cfg.max_input_tokens = _u32("max_input_tokens", max_input_tokens)
        cfg.batch_fixed_us = _u32("batch_fixed_us", batch_fixed_us)
        cfg.token_ns = _u32("token_ns", token_ns)
        cfg.cache_shapes = _u32("cache_shapes", cache_shapes)
        cfg.prefetch = _u32("prefetch", prefetch)
        cfg.prefetch_expires_ms = _u32("pull_expires_ms", pull_expires_ms)
        cfg.request_timeout_ms = max(1, int(ack_timeout * 1000))
        cfg.request_retries = _u32("ack_retries", ack_retries)
        if heartbeat_ms == 0:
            cfg.no_heartbeat = True
        elif heartbeat_ms is not None:
            cfg.heartbeat_ms = _u32("heartbeat_ms", heartbeat_ms)
        self._cfg = cfg
        self._ack_timeout = ack_timeout
        self._lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._waiting = 0
        self._closed = False
        self._need_register = False
        self._lost_seen = 0
        self._registered_at = time.monotonic()  # of the current registration
        self._rereg_wait = 0.0  # before the next registration again (invariant 3)
        self._rereg_at: Optional[float] = None  # ... and when it may go
        self.registrations = 0
        self.generation = 0
        self._h: Optional[ctypes.c_void_p] = None
        self._open(register_retry_for)

    # ---- registration -------------------------------------------------------------------

    def _open(self, retry_for: float) -> None:
        end = time.monotonic() + retry_for
        wait = 0.1
        while True:
            h = ctypes.c_void_p()
            st = lib.lc_consumer_open(self.client._handle(), ctypes.byref(self._cfg), ctypes.byref(h))
            if st == S["LC_OK"]:
                self._h = h
                self._registered()
                return
            err = from_status(st, self.client._error())
            if st not in (S["LC_ETIMEOUT"], S["LC_ENORESPONDERS"]) or time.monotonic() + wait > end:
                raise err
            self._warn(err)
            time.sleep(wait)
            wait = min(wait * 2, 2.0)

    def _registered(self) -> None:
        self._registered_at = time.monotonic()
        self._rereg_at = None
        self.registrations += 1
        self.generation += 1
        r = lib.lc_consumer_registered_get(self._h).contents
        d = lambda b: (b or b"").decode()  # noqa: E731
        self.registration = Registration(
            d(r.consumer_id),
            d(r.pull_subject),
            d(r.ack_subject),
            d(r.heartbeat_subject),
            d(r.bye_subject),
            int(r.heartbeat_ms),
            int(r.dead_after_ms),
            int(r.ack_wait_ms),
        )
        self._lost_seen = self._stats().pulls_lost

    @property
    def id(self) -> str:
        """The current consumer id (changes when the consumer registers again)."""
        return self.registration.consumer_id

    def _warn(self, err: LanesError) -> None:
        if self._on_warning is not None:
            self._on_warning(err)
        else:
            log.warning("lanesched consumer %s: %s", self.model, err)

    def _error(self) -> str:
        return lib.lc_consumer_error_get(self._h).decode("utf-8", "replace") if self._h else ""

    def _reregister(self, deadline: Optional[float]) -> bool:
        """Invariant 3: registers again, with backoff, until it works, the consumer is closed or
        the caller's deadline passes (then False: the next call goes on trying)."""
        now = time.monotonic()
        if self._rereg_at is None:
            calm = self._rereg_wait if now - self._registered_at < REREGISTER_CALM_S else 0.0
            self._rereg_wait = min(max(2 * calm, 0.2), 5.0)
            self._rereg_at = now + calm
        if now < self._rereg_at:
            until = self._rereg_at if deadline is None else min(self._rereg_at, deadline)
            while not self._closed and time.monotonic() < until:
                time.sleep(min(SLICE_S, max(0.0, until - time.monotonic())))
            if self._closed or time.monotonic() < self._rereg_at:
                return False
        wait = 0.2
        while not self._closed:
            with self._locked():
                if self._closed:
                    return False
                st = lib.lc_consumer_register(self._h)
                if st == S["LC_OK"]:
                    self._need_register = False
                    self._registered()
                    return True
                err = from_status(st, self._error())
            self._warn(err)
            if deadline is not None and time.monotonic() + wait > deadline:
                return False
            time.sleep(wait)
            wait = min(wait * 2, 5.0)
        return False

    def _probe(self) -> None:
        """Invariant 3: is this consumer id still known? unknown_batch answers yes."""
        ack = _native.Ack()
        reply = _native.AckReply()
        with self._locked():
            if self._h is None:
                return
            st = lib.lc_ack_send(self._h, ctypes.byref(ack), max(1, int(self._ack_timeout * 1000)), ctypes.byref(reply))
            text = self._error()
        if st in (S["LC_EUNKNOWN_BATCH"], S["LC_OK"]):
            return
        self._warn(LanesError(from_status(st, text).code, "a pull was lost; registering again"))
        self._need_register = True

    # ---- the lock (invariant 2) ---------------------------------------------------------

    class _Locked:
        def __init__(self, c: "Consumer") -> None:
            self.c = c

        def __enter__(self) -> None:
            self.c._waiting += 1
            self.c._lock.acquire()
            self.c._waiting -= 1

        def __exit__(self, *exc: object) -> None:
            self.c._lock.release()

    def _locked(self) -> "Consumer._Locked":
        return Consumer._Locked(self)

    # ---- batches ------------------------------------------------------------------------

    def next(self, timeout: Optional[float] = None) -> Optional[Batch]:
        """The next batch; None after close(), or when timeout seconds pass first."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            if self._need_register:
                if not self._reregister(end):
                    if self._closed or (end is not None and time.monotonic() >= end):
                        return None
                continue
            now = time.monotonic()
            left = SLICE_S if end is None else min(SLICE_S, max(0.0, end - now))
            out = ctypes.POINTER(_native.Batch)()
            with self._locked():
                if self._closed:
                    return None
                st = lib.lc_batch_next(self._h, int(left * 1000), ctypes.byref(out))
                text = self._error()
                batch = None
                if st == S["LC_OK"]:
                    try:
                        batch = Batch(self, out.contents)
                    finally:
                        lib.codec_batch_destroy(out)
                lost = self._stats().pulls_lost if st == S["LC_ETIMEOUT"] else 0
            if batch is not None:
                return batch
            if st == S["LC_ETIMEOUT"]:
                if lost > self._lost_seen:
                    self._lost_seen = lost
                    self._probe()
            elif st == S["LC_ENORESPONDERS"]:
                self._probe()
            elif st == S["LC_EUNKNOWN_CONSUMER"]:
                self._warn(LanesError("unknown_consumer", "the daemon forgot this consumer; registering again"))
                self._need_register = True
            elif st in (S["LC_EREFUSED"], S["LC_ECODEC"], S["LC_EPROTO"]):
                self._warn(from_status(st, text))
                if st == S["LC_EREFUSED"]:
                    time.sleep(ERROR_PAUSE_S)
            elif st != S["LC_EEMPTY"]:
                raise from_status(st, text)
            if self._waiting:
                time.sleep(0.001)  # invariant 2: let an ack in
            if end is not None and time.monotonic() >= end:
                return None
        return None

    def __iter__(self) -> Iterator[Batch]:
        while True:
            b = self.next()
            if b is None:
                return
            yield b

    async def next_async(self, timeout: Optional[float] = None) -> Optional[Batch]:
        """next() on a worker thread, so the event loop keeps running."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            left = SLICE_S * 4 if end is None else min(SLICE_S * 4, max(0.0, end - time.monotonic()))
            b = await asyncio.to_thread(self.next, left)
            if b is not None or (end is not None and time.monotonic() >= end):
                return b
        return None

    def __aiter__(self) -> AsyncIterator[Batch]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[Batch]:
        while True:
            b = await self.next_async()
            if b is None:
                return
            yield b

    # ---- acks ---------------------------------------------------------------------------

    def _ack(self, batch: Batch, *, all: bool = False, ack: List[int] = [], nak: List[int] = [],
             in_progress: bool = False, timeout: Optional[float] = None) -> AckReply:
        if self._closed:
            raise LanesError("closed", "the consumer is closed")
        for p in list(ack) + list(nak):
            _u32("position", p)
        a = _native.Ack()
        a.batch_id = batch.batch_id
        a.all = all
        a.in_progress = in_progress
        arr_a = (ctypes.c_uint32 * max(1, len(ack)))(*ack)
        arr_n = (ctypes.c_uint32 * max(1, len(nak)))(*nak)
        if ack:
            a.ack, a.n_ack = ctypes.cast(arr_a, ctypes.POINTER(ctypes.c_uint32)), len(ack)
        if nak:
            a.nak, a.n_nak = ctypes.cast(arr_n, ctypes.POINTER(ctypes.c_uint32)), len(nak)
        reply = _native.AckReply()
        t = self._ack_timeout if timeout is None else timeout
        with self._locked():
            if self._h is None:
                raise LanesError("closed", "the consumer is closed")
            st = lib.lc_ack_send(self._h, ctypes.byref(a), max(1, int(t * 1000)), ctypes.byref(reply))
            text = self._error()
        if st == S["LC_OK"]:
            if not in_progress:
                batch.settled.update(range(len(batch.items)) if all else list(ack) + list(nak))
                batch.done = len(batch.settled) >= len(batch.items)
            return AckReply(reply.acked, reply.returned, reply.unknown)
        if st == S["LC_EUNKNOWN_BATCH"]:
            batch.done = True
            return AckReply(unknown=1, code="unknown_batch", error=text)
        if st == S["LC_EUNKNOWN_CONSUMER"]:
            batch.done = True
            self._need_register = True
            return AckReply(unknown=1, code="unknown_consumer", error=text)
        if st == S["LC_EREFUSED"]:
            return AckReply(unknown=1, code=daemon_word(text), error=text)
        raise from_status(st, text)

    def _release(self, batch: Batch) -> None:
        with self._locked():
            if self._h is not None:
                lib.lc_inprogress_remove(self._h, batch.batch_id)

    # ---- figures and leaving ------------------------------------------------------------

    def _stats(self) -> _native.ConsumerStats:
        """The C consumer's counters; the caller holds the lock (or owns the consumer alone)."""
        s = _native.ConsumerStats()
        if self._h is not None:
            lib.lc_consumer_stats_get(self._h, ctypes.byref(s))
        return s

    def stats(self) -> dict:
        """The C client's counters: registrations, pulls_sent, batches, expired, pulls_lost,
        heartbeats_sent, heartbeats_failed, in_progress, ..."""
        with self._locked():
            s = self._stats()
        return {name: int(getattr(s, name)) for name, _ in _native.ConsumerStats._fields_}

    def close(self, bye: bool = True) -> Optional[str]:
        """Stops. With bye (the default) the daemon returns this consumer's unfinished batches at
        once; without, after dead_after_ms (as after a crash). Returns the Bye's error word, ""
        when it was answered cleanly, None without a Bye. A second call, from any thread, waits
        for the first to finish (Client.close frees the connection right after)."""
        self._closed = True  # next() and the other threads stop at their next slice
        with self._close_lock:
            result: Optional[str] = None
            with self._locked():
                h, self._h = self._h, None
                if h is None:
                    return None
                if bye:
                    st = lib.lc_bye_send(h, max(1, int(self._ack_timeout * 1000)))
                    text = lib.lc_consumer_error_get(h).decode("utf-8", "replace")
                    result = "" if st == S["LC_OK"] else from_status(st, text).code
                lib.lc_consumer_close(h)
            self.client._forget(self)
            return result

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

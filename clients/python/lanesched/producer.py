"""producer - work items to P.submit.<model>, per-item verdicts back (subjects.md,
"P.submit.<model>" and "Delivery guarantees / Submitting").

Invariants:
  1. The model name is checked by the codec's own rule before anything is sent (shape.py).
  2. Every retry of a Submit carries the same items with the same ids and the same
     created_unix_ns: the daemon's dedupe stores each item once and answers DUPLICATE for what a
     lost attempt stored.
  3. Items are cut into Submits that fit the server's max_payload, message and reply both
     (subjects.md, "How many items in one Submit"), at most max_items each, sent in order; an item
     too large alone is not sent and gets REJECTED / payload_too_large, the others go on.
  4. A status this package does not know reads as rejected: nothing unknown is taken as stored.
  5. Integers that the wire holds in 32 or 64 bits are checked here: ctypes would wrap them.

Rejected: resubmitting store_full / queue_full items by itself (the caller decides how long to
wait; the result says which to send again, with the same ids).
"""

from __future__ import annotations

import ctypes
import math
import random
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Union

from . import _native
from .errors import LanesError, from_status
from .shape import EMPTY_SIGNATURE, Component, check_model, shape_sign

if TYPE_CHECKING:
    from .client import Client

lib = _native.lib
S = _native.STATUS

U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF
# Reply bytes per item beside its id, and for the reply itself (subjects.md, "How many items in
# one Submit"): the daemon keeps every ItemResult within its id plus 160 bytes.
REPLY_BYTES_PER_ITEM = 160
REPLY_BYTES_FIXED = 256
# One Submit is handled in one daemon turn and answered after its flush: 1,000 items at most
# keep every other producer's replies prompt (subjects.md).
SUBMIT_MAX_ITEMS = 1000
# A WorkItem's framing and fixed fields beside its variable parts (tags, lengths, tokens,
# signature, created_unix_ns, prefix_tokens, max_wait_ms): at most 48 bytes.
ITEM_OVERHEAD = 48

STATUS_NAMES = {0: "accepted", 1: "duplicate", 2: "rejected"}


@dataclass
class Item:
    """One unit of work. The shape is components (hashed here), signature, component_hashes
    (the daemon computes the signature) or both of the last two (the daemon checks they agree);
    none of them: the empty shape. prefix_tokens and max_wait_ms: 0 = not sent."""

    id: Union[str, bytes]
    tokens: int
    components: Optional[Sequence[Component]] = None
    signature: Optional[int] = None
    component_hashes: Optional[Sequence[int]] = None
    payload: Optional[Union[bytes, str]] = None
    reply_to: Optional[str] = None
    created_unix_ns: Optional[int] = None
    prefix_tokens: int = 0
    max_wait_ms: int = 0


@dataclass(frozen=True)
class ItemResult:
    """The daemon's verdict on one item: status accepted / duplicate / rejected, reason the code
    word (ok, duplicate, zero_tokens, queue_full, ...)."""

    id: Union[str, bytes]
    status: str
    reason: str

    @property
    def stored(self) -> bool:
        return self.status in ("accepted", "duplicate")


@dataclass
class SubmitResult:
    results: List[ItemResult] = field(default_factory=list)
    attempts: int = 0

    @property
    def accepted(self) -> int:
        return sum(r.status == "accepted" for r in self.results)

    @property
    def duplicate(self) -> int:
        return sum(r.status == "duplicate" for r in self.results)

    @property
    def rejected(self) -> int:
        return sum(r.status == "rejected" for r in self.results)

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> ItemResult:
        return self.results[i]


def _item(x: Union[Item, Mapping[str, Any]]) -> Item:
    if isinstance(x, Item):
        return x
    if isinstance(x, Mapping):
        return Item(**x)  # an unknown key is a TypeError
    raise TypeError("an item is a lanesched.Item or a dict of its fields")


def _uint(name: str, v: Any, top: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > top:
        raise ValueError(f"{name} must be an integer in 0..{top}, not {v!r}")
    return v


class _Encoded:
    """An item as the C client's codec_work_item_t, with the Python objects it points into."""

    def __init__(self, model: bytes, it: Item, now_ns: int) -> None:
        self.item = it
        self.id = it.id.encode("utf-8") if isinstance(it.id, str) else bytes(it.id)
        payload = it.payload.encode("utf-8") if isinstance(it.payload, str) else bytes(it.payload or b"")
        reply_to = (it.reply_to or "").encode("utf-8")
        if b"\0" in reply_to:
            raise ValueError("reply_to contains a NUL byte")
        self.keep = [self.id, payload, reply_to]
        w = _native.WorkItem()
        w.id = _native.Bytes(ctypes.cast(ctypes.c_char_p(self.id), ctypes.POINTER(ctypes.c_uint8)), len(self.id))
        w.model = model
        w.tokens = _uint("tokens", it.tokens, U32)
        w.payload = _native.Bytes(ctypes.cast(ctypes.c_char_p(payload), ctypes.POINTER(ctypes.c_uint8)), len(payload))
        w.reply_to = reply_to or None
        created = now_ns if it.created_unix_ns is None else it.created_unix_ns
        w.created_unix_ns = _uint("created_unix_ns", created, U64)
        w.prefix_tokens = _uint("prefix_tokens", it.prefix_tokens, U32)
        w.max_wait_ms = _uint("max_wait_ms", it.max_wait_ms, U32)
        hashes = list(it.component_hashes or [])
        if hashes:
            arr = (ctypes.c_uint64 * len(hashes))(*[_uint("component hash", h, U64) for h in hashes])
            self.keep.append(arr)
            w.component_hashes = ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint64))
            w.n_component_hashes = len(hashes)
        sig = it.signature
        if sig is None and it.components is not None:
            sig = shape_sign(it.components)
        if sig is None and not hashes:
            sig = EMPTY_SIGNATURE
        if sig is not None:
            if _uint("signature", sig, U64) == 0:
                raise ValueError("a signature of 0 cannot be sent (proto3 reads it as absent)")
            w.has_signature = True
            w.signature = sig
        self.w = w
        self.msg_bytes = len(self.id) + len(model) + len(payload) + len(reply_to) + 8 * len(hashes) + ITEM_OVERHEAD
        self.reply_bytes = len(self.id) + REPLY_BYTES_PER_ITEM


class Producer:
    """Submits items with request/reply, retrying with the same ids (invariant 2).

    Options: timeout (one attempt's wait, seconds; 2.0), retry_for (how long a Submit is resent
    while no reply comes; 60.0, half the daemon's default dedupe window), max_items (items per
    Submit at most; 1000), backoff and max_backoff (the pause after a no-responders answer,
    doubling: 0.1 to 2.0 s). Unknown options are a TypeError.
    """

    def __init__(
        self,
        client: "Client",
        *,
        timeout: float = 2.0,
        retry_for: float = 60.0,
        max_items: int = SUBMIT_MAX_ITEMS,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
    ) -> None:
        if timeout <= 0 or retry_for < 0 or max_items < 1:
            raise ValueError("timeout > 0, retry_for >= 0 and max_items >= 1")
        self.client = client
        self.timeout = timeout
        self.retry_for = retry_for
        self.max_items = max_items
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.closed = threading.Event()

    def _plan(self, enc: List[_Encoded], max_payload: int):
        chunks: List[List[int]] = []
        oversized: List[int] = []
        cur: Optional[List[int]] = None
        msg = rep = 0
        for i, e in enumerate(enc):
            m = e.msg_bytes + 4
            if m > max_payload or e.reply_bytes + REPLY_BYTES_FIXED > max_payload:
                oversized.append(i)
                continue
            if cur is None or len(cur) >= self.max_items or msg + m > max_payload or rep + e.reply_bytes > max_payload:
                cur = []
                chunks.append(cur)
                msg, rep = 0, REPLY_BYTES_FIXED
            cur.append(i)
            msg += m
            rep += e.reply_bytes
        return chunks, oversized

    def _encode(self, model: str, items: Sequence[Union[Item, Mapping[str, Any]]]):
        m = check_model(model)  # invariant 1
        now = time.time_ns()
        return m, [_Encoded(m, _item(x), now) for x in items]

    def submit(self, model: str, items: Sequence[Union[Item, Mapping[str, Any]]]) -> SubmitResult:
        """Submits items and returns once the daemon made the accepted ones durable: a
        SubmitResult with one ItemResult per item, in order. Raises LanesError: the codec's word
        for a bad model name; the daemon's word when it refused a whole message (malformed,
        too_many_items, reply_too_large); timeout / no_responders when a Submit got no reply
        within retry_for (earlier Submits were stored: submit everything again, the same ids come
        back duplicate)."""
        m, enc = self._encode(model, items)
        results: List[Optional[ItemResult]] = [None] * len(enc)
        out = SubmitResult()
        chunks, oversized = self._plan(enc, self.client.max_payload)
        for i in oversized:
            results[i] = ItemResult(enc[i].item.id, "rejected", "payload_too_large")
        for idx in chunks:
            arr = (_native.WorkItem * len(idx))(*[enc[i].w for i in idx])
            res = (_native.ItemResult * len(idx))()
            out.attempts += self._request(m, arr, res, len(idx))
            for k, i in enumerate(idx):
                st = STATUS_NAMES.get(res[k].status, "rejected")  # invariant 4
                results[i] = ItemResult(enc[i].item.id, st, res[k].reason.decode("utf-8", "replace"))
        out.results = [r for r in results if r is not None]
        return out

    def _request(self, model: bytes, arr: Any, res: Any, n: int) -> int:
        end = time.monotonic() + self.retry_for
        wait = self.backoff
        summary = _native.SubmitSummary()
        for attempt in range(1, 1 << 30):
            h = self.client._handle()
            st = lib.lc_submit_request(h, model, arr, n, max(1, int(self.timeout * 1000)), 0, res, ctypes.byref(summary))
            if st == S["LC_OK"]:
                return attempt
            err = from_status(st, self.client._error())
            if st not in (S["LC_ETIMEOUT"], S["LC_ENORESPONDERS"]):
                raise err
            left = end - time.monotonic()
            if left <= 0 or self.closed.is_set():
                raise LanesError(err.code, f"{self.client.subject('submit', model.decode())}: no reply after {attempt} attempts")
            if st == S["LC_ENORESPONDERS"]:
                time.sleep(min(left, wait * (1 + random.random() / 4)))
                wait = min(wait * 2, self.max_backoff)
        return 0

    def send(self, model: str, items: Sequence[Union[Item, Mapping[str, Any]]]) -> int:
        """Fire-and-forget (at most once): publishes, learns nothing back; returns items sent."""
        m, enc = self._encode(model, items)
        chunks, oversized = self._plan(enc, self.client.max_payload)
        for idx in chunks:
            arr = (_native.WorkItem * len(idx))(*[enc[i].w for i in idx])
            st = lib.lc_submit_send(self.client._handle(), m, arr, len(idx))
            if st != S["LC_OK"]:
                raise from_status(st, self.client._error())
        return len(enc) - len(oversized)

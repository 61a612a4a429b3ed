"""_native - liblanes_client.so (clients/c over nats.c) through ctypes: loading it, the structs
this package mirrors, the prototypes of the calls it makes and the status numbers.

Invariants:
  1. Every mirrored struct is compared with the library's own sizeof (lc_abi_size) at load time;
     a mismatch refuses to load (a wrong layout would read garbage, never fail loudly).
  2. Status numbers are read from lc_status_str, not copied: LC_<NAME> = the index whose text
     the library gives; the names this package uses are checked to exist.
  3. Every pointer the library returns for lc_free is released with lc_free (never Python's or
     libc's free through another path).

Rejected: cffi (not in Debian's python3 by default for a pyenv interpreter, and its API mode needs
a compiler at install time); a pure-Python NATS client (Debian has none, and writing one is what
the C client already did over nats.c, a maintained implementation).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Optional

LIB_ENV = "LANESCHED_CLIENT_LIB"
LIB_NAME = "liblanes_client.so"


class Bytes(Structure):
    _fields_ = [("ptr", POINTER(c_uint8)), ("len", c_size_t)]


class ClientConfig(Structure):
    _fields_ = [
        ("servers", c_char_p),
        ("prefix", c_char_p),
        ("name", c_char_p),
        ("user", c_char_p),
        ("password", c_char_p),
        ("token", c_char_p),
        ("creds_file", c_char_p),
        ("tls_ca_file", c_char_p),
        ("tls_cert_file", c_char_p),
        ("tls_key_file", c_char_p),
        ("tls", c_bool),
        ("connect_timeout_ms", c_int64),
        ("inbox_prefix", c_char_p),
        ("nats_flusher", c_bool),
    ]


class ItemResult(Structure):
    _fields_ = [("status", c_int), ("reason", c_char * 32)]


class SubmitSummary(Structure):
    _fields_ = [
        ("accepted", c_uint32),
        ("duplicates", c_uint32),
        ("rejected", c_uint32),
        ("attempts", c_uint32),
    ]


class AckReply(Structure):
    _fields_ = [("acked", c_uint32), ("returned", c_uint32), ("unknown", c_uint32)]


class ConsumerConfig(Structure):
    _fields_ = [
        ("model", c_char_p),
        ("max_batch_size", c_uint32),
        ("max_batch_tokens", c_uint32),
        ("max_input_tokens", c_uint32),
        ("name", c_char_p),
        ("request_timeout_ms", c_int64),
        ("request_retries", c_uint32),
        ("pull_max_batches", c_uint32),
        ("heartbeat_ms", c_uint32),
        ("no_heartbeat", c_bool),
        ("prefetch", c_uint32),
        ("prefetch_expires_ms", c_uint32),
        ("ack_window", c_uint32),
        ("ack_done", c_void_p),
        ("ack_closure", c_void_p),
        ("batch_fixed_us", c_uint32),
        ("token_ns", c_uint32),
        ("cache_shapes", c_uint32),
    ]


class Registered(Structure):
    _fields_ = [
        ("consumer_id", c_char_p),
        ("pull_subject", c_char_p),
        ("ack_subject", c_char_p),
        ("heartbeat_subject", c_char_p),
        ("bye_subject", c_char_p),
        ("heartbeat_ms", c_uint32),
        ("dead_after_ms", c_uint32),
        ("ack_wait_ms", c_uint32),
    ]


class ConsumerStats(Structure):
    _fields_ = [
        (name, c_uint64)
        for name in (
            "registrations",
            "pulls_sent",
            "batches",
            "expired",
            "pulls_lost",
            "heartbeats_sent",
            "heartbeats_failed",
            "in_progress",
            "acks_async",
            "acks_async_failed",
        )
    ]


class WorkItem(Structure):
    _fields_ = [
        ("id", Bytes),
        ("model", c_char_p),
        ("component_hashes", POINTER(c_uint64)),
        ("n_component_hashes", c_size_t),
        ("has_signature", c_bool),
        ("signature", c_uint64),
        ("tokens", c_uint32),
        ("payload", Bytes),
        ("reply_to", c_char_p),
        ("created_unix_ns", c_uint64),
        ("prefix_tokens", c_uint32),
        ("max_wait_ms", c_uint32),
        ("status", c_int),
        ("shape", c_uint64),
        ("model_len", c_size_t),
        ("reply_to_len", c_size_t),
    ]


class BatchItem(Structure):
    _fields_ = [
        ("id", Bytes),
        ("tokens", c_uint32),
        ("payload", Bytes),
        ("reply_to", c_char_p),
        ("deliveries", c_uint32),
        ("prefix_tokens", c_uint32),
    ]


class Batch(Structure):
    _fields_ = [
        ("batch_id", c_uint64),
        ("model", c_char_p),
        ("signature", c_uint64),
        ("lane", c_uint32),
        ("pad_to", c_uint32),
        ("items", POINTER(BatchItem)),
        ("n_items", c_size_t),
        ("status", c_int),
        ("error", c_char_p),
    ]


class Ack(Structure):
    _fields_ = [
        ("batch_id", c_uint64),
        ("all", c_bool),
        ("ack", POINTER(c_uint32)),
        ("n_ack", c_size_t),
        ("nak", POINTER(c_uint32)),
        ("n_nak", c_size_t),
        ("in_progress", c_bool),
    ]


MIRRORED = {
    "lc_client_config_t": ClientConfig,
    "lc_consumer_config_t": ConsumerConfig,
    "lc_registered_t": Registered,
    "lc_consumer_stats_t": ConsumerStats,
    "lc_item_result_t": ItemResult,
    "lc_submit_summary_t": SubmitSummary,
    "lc_ack_reply_t": AckReply,
    "codec_work_item_t": WorkItem,
    "codec_batch_t": Batch,
    "codec_batch_item_t": BatchItem,
    "codec_ack_t": Ack,
    "codec_bytes_t": Bytes,
}

# (name, restype, argtypes) of every call this package makes.
_P = c_void_p
_PROTOS = [
    ("lc_abi_size", c_size_t, [c_char_p]),
    ("lc_free", None, [c_void_p]),
    ("lc_status_str", c_char_p, [c_int]),
    ("codec_status_reason", c_char_p, [c_int]),
    ("codec_model_check", c_int, [c_char_p]),
    ("codec_hash_component", c_uint64, [c_void_p, c_size_t]),
    ("codec_signature", c_uint64, [POINTER(c_uint64), c_size_t]),
    ("lc_client_config_init", None, [POINTER(ClientConfig)]),
    ("lc_client_open", c_int, [POINTER(ClientConfig), c_char_p, c_size_t, POINTER(_P)]),
    ("lc_client_close", None, [_P]),
    ("lc_client_flush", c_int, [_P, c_int64]),
    ("lc_client_error_get", c_char_p, [_P]),
    ("lc_client_max_payload_get", c_int64, [_P]),
    (
        "lc_submit_request",
        c_int,
        [_P, c_char_p, POINTER(WorkItem), c_size_t, c_int64, c_uint32, POINTER(ItemResult), POINTER(SubmitSummary)],
    ),
    ("lc_submit_send", c_int, [_P, c_char_p, POINTER(WorkItem), c_size_t]),
    ("lc_msg_publish", c_int, [_P, c_char_p, c_void_p, c_size_t]),
    ("lc_msg_request", c_int, [_P, c_char_p, c_void_p, c_size_t, c_int64, POINTER(_P), POINTER(c_size_t)]),
    ("lc_msg_inbox_make", c_int, [_P, POINTER(_P)]),
    ("lc_sub_open", c_int, [_P, c_char_p, POINTER(_P)]),
    ("lc_sub_next", c_int, [_P, c_int64, POINTER(_P), POINTER(_P), POINTER(c_size_t)]),
    ("lc_sub_close", None, [_P]),
    ("lc_consumer_config_init", None, [POINTER(ConsumerConfig)]),
    ("lc_consumer_open", c_int, [_P, POINTER(ConsumerConfig), POINTER(_P)]),
    ("lc_consumer_register", c_int, [_P]),
    ("lc_consumer_registered_get", POINTER(Registered), [_P]),
    ("lc_consumer_error_get", c_char_p, [_P]),
    ("lc_consumer_stats_get", None, [_P, POINTER(ConsumerStats)]),
    ("lc_consumer_close", None, [_P]),
    ("lc_bye_send", c_int, [_P, c_int64]),
    ("lc_batch_next", c_int, [_P, c_int64, POINTER(POINTER(Batch))]),
    ("codec_batch_destroy", None, [POINTER(Batch)]),
    ("lc_ack_send", c_int, [_P, POINTER(Ack), c_int64, POINTER(AckReply)]),
    ("lc_inprogress_add", c_int, [_P, c_uint64]),
    ("lc_inprogress_remove", None, [_P, c_uint64]),
]

# The statuses this package acts on, by their names in lanes_client.h (invariant 2).
STATUS_NAMES = (
    "LC_OK",
    "LC_EINVAL",
    "LC_ENOMEM",
    "LC_ECONNECT",
    "LC_ENATS",
    "LC_ETIMEOUT",
    "LC_ENORESPONDERS",
    "LC_ETOOBIG",
    "LC_ECODEC",
    "LC_EPROTO",
    "LC_EREFUSED",
    "LC_EEMPTY",
    "LC_EUNKNOWN_CONSUMER",
    "LC_EUNKNOWN_BATCH",
    "LC_ETHREAD",
)


def _candidates() -> list[str]:
    here = Path(__file__).resolve().parent
    out = []
    env = os.environ.get(LIB_ENV)
    if env:
        return [env]  # an explicit choice is the only one tried
    out.append(str(here / "_lib" / LIB_NAME))  # bundled by `pip install clients/python`
    out.append(str(here.parent.parent.parent / "build" / "lib" / LIB_NAME))  # the source tree's build
    found = ctypes.util.find_library("lanes_client")  # `cmake --install build`
    if found:
        out.append(found)
    out.append("/usr/local/lib/" + LIB_NAME)
    return out


class NativeLibraryError(ImportError):
    """The C client library could not be found, loaded, or does not match this package."""


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        if "/" in path and not os.path.exists(path):
            tried.append(f"{path} (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as err:
            hint = ""
            if "ASan runtime" in str(err) or "asan" in str(err).lower():
                hint = " (an ASan build: preload the runtime, LD_PRELOAD=$(gcc -print-file-name=libasan.so))"
            raise NativeLibraryError(f"cannot load {path}: {err}{hint}") from err
    raise NativeLibraryError(
        f"{LIB_NAME} not found; build it (cmake --build build --target lanes_client_shared) or set "
        f"{LIB_ENV}. Tried: {'; '.join(tried)}"
    )


lib = _load()
for _name, _res, _args in _PROTOS:
    try:
        _fn = getattr(lib, _name)
    except AttributeError as _err:
        raise NativeLibraryError(f"{lib._name} has no {_name}: an older build of the C client") from _err
    _fn.restype = _res
    _fn.argtypes = _args

for _cname, _cls in MIRRORED.items():  # invariant 1
    _size = lib.lc_abi_size(_cname.encode())
    if _size != ctypes.sizeof(_cls):
        raise NativeLibraryError(
            f"{lib._name}: sizeof({_cname}) is {_size}, this package expects {ctypes.sizeof(_cls)}: "
            "the library and the package come from different versions"
        )

STATUS: dict[str, int] = {}
_texts = {}
for _i in range(64):
    _t = lib.lc_status_str(_i)
    if _t is None or _t == b"unknown client status":
        break
    _texts[_i] = _t.decode()
STATUS = {name: i for i, name in enumerate(STATUS_NAMES) if i in _texts}
if len(STATUS) != len(STATUS_NAMES) or _texts.get(STATUS["LC_EUNKNOWN_BATCH"], "").find("batch") < 0:
    raise NativeLibraryError(f"{lib._name}: its status list is not the one this package knows")


def status_text(st: int) -> str:
    return _texts.get(st, f"status {st}")


# The codec's code words, in its order (codec_status_reason); the daemon's own words beside them.
CODEC_WORDS: list[str] = []
for _i in range(256):
    _w = lib.codec_status_reason(_i).decode()
    if _w == "unknown_status":
        break
    CODEC_WORDS.append(_w)
DAEMON_WORDS = ("unknown_consumer", "unknown_batch", "unknown_position", "publish_failed", "delivery_limit")


def take_bytes(ptr: c_void_p, n: int) -> bytes:
    """Copies n bytes at ptr (returned by the library for lc_free), then frees them (invariant 3)."""
    try:
        return ctypes.string_at(ptr, n) if n else b""
    finally:
        lib.lc_free(ptr)


def take_str(ptr: c_void_p) -> str:
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.lc_free(ptr)


def view(b: Bytes) -> bytes:
    """A copy of a codec_bytes_t view."""
    return ctypes.string_at(b.ptr, b.len) if b.len else b""


def library_path() -> Optional[str]:
    return getattr(lib, "_name", None)

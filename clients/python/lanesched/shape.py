"""shape - shape signatures and the model-name rule, computed by the C codec itself (subjects.md,
"Shape signatures and test vectors" and "Model names").

Invariants:
  1. h_i = XXH64(component bytes, seed 0), a str component being its UTF-8 bytes; the signature
     is XXH64 of the h_i as 8 little-endian bytes each. Both come from codec_hash_component and
     codec_signature: the producer and the daemon cannot disagree.
  2. A model name is checked by codec_model_check, the daemon's own rule, before anything is
     sent: a bad name fails at once with the codec's word instead of timing out on a subject no
     daemon serves.
"""

from __future__ import annotations

import ctypes
from typing import Iterable, Union

from . import _native
from .errors import LanesError

Component = Union[str, bytes, bytearray, memoryview]

EMPTY_SIGNATURE = 0xEF46DB3751D8E999


def _bytes(component: Component) -> bytes:
    if isinstance(component, str):
        return component.encode("utf-8")
    if isinstance(component, (bytes, bytearray, memoryview)):
        return bytes(component)
    raise TypeError("a shape component is a str or bytes")


def shape_hash(component: Component) -> int:
    """XXH64 (seed 0) of one component."""
    b = _bytes(component)
    return int(_native.lib.codec_hash_component(b, len(b)))


def shape_sign_hashes(hashes: Iterable[int]) -> int:
    """The signature of component hashes given in order."""
    hs = [int(h) & 0xFFFFFFFFFFFFFFFF for h in hashes]
    arr = (ctypes.c_uint64 * max(1, len(hs)))(*hs)
    return int(_native.lib.codec_signature(arr, len(hs)))


def shape_sign(components: Iterable[Component]) -> int:
    """The signature of a prompt's cacheable components, in order."""
    return shape_sign_hashes(shape_hash(c) for c in components)


def shape_format(signature: int) -> str:
    """"0x" and 16 lowercase hex digits, as P.stats writes a signature."""
    return f"0x{signature & 0xFFFFFFFFFFFFFFFF:016x}"


def shape_parse(text: str) -> int:
    """Parses "0x..." or bare hex (1 to 16 digits, not 0)."""
    t = text[2:] if text.lower().startswith("0x") else text
    if not 1 <= len(t) <= 16 or any(c not in "0123456789abcdefABCDEF" for c in t) or int(t, 16) == 0:
        raise ValueError(f"not a 64-bit hex signature: {text!r}")
    return int(t, 16)


def check_model(model: str) -> bytes:
    """Raises LanesError with the codec's word (bad_model, model_too_long, bad_model_name) unless
    model is a name the daemon accepts; returns it as UTF-8 bytes."""
    if not isinstance(model, str):
        raise TypeError("model is a str")
    b = model.encode("utf-8")
    if b"\0" in b:
        raise LanesError("bad_model_name", f"model {model!r} contains a NUL byte")
    st = _native.lib.codec_model_check(b)
    if st != 0:
        word = _native.lib.codec_status_reason(st).decode()
        raise LanesError(word, f"model {model!r}")
    return b

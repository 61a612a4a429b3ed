"""errors - the package's one exception, named by a stable code word (subjects.md, "Error words").

Invariants:
  1. LanesError.code is a daemon or codec code word (the text of an error up to the first ':')
     or one of this package's own: timeout, no_responders, closed, connect, nats, bad_reply.
  2. A code word is decided from the word alone, never from the text after it.

Rejected: one subclass per word (callers would test against a list that grows with the daemon's;
a string compares the same way in every language's client).
"""

from __future__ import annotations

import re

from . import _native


class LanesError(Exception):
    """An error with a stable code word (``code``) and a text for people."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.text = message


def code_word(error: str) -> str:
    """The code word of an error string: "unknown_batch: ..." -> "unknown_batch"; "" -> ""."""
    if not error:
        return ""
    return error.split(":", 1)[0].strip()


_KNOWN = set(_native.CODEC_WORDS) | set(_native.DAEMON_WORDS)
_WORD = re.compile(r"(?:^|[:\s])([a-z][a-z0-9_]*)(?=:|$)")

# Library statuses that are not a daemon's word: their own code (invariant 1).
_OWN = {
    "LC_ETIMEOUT": "timeout",
    "LC_ENORESPONDERS": "no_responders",
    "LC_ECONNECT": "connect",
    "LC_ENATS": "nats",
    "LC_ETOOBIG": "too_large",
    "LC_ENOMEM": "no_memory",
    "LC_ECODEC": "bad_reply",
    "LC_EPROTO": "bad_reply",
    "LC_EINVAL": "bad_argument",
    "LC_EEMPTY": "empty",
    "LC_EUNKNOWN_CONSUMER": "unknown_consumer",
    "LC_EUNKNOWN_BATCH": "unknown_batch",
    "LC_ETHREAD": "thread",
}
_BY_NUMBER = {_native.STATUS[k]: v for k, v in _OWN.items()}


def daemon_word(text: str) -> str:
    """The first known code word in a C client's failure text ("subject: refused: word: ...")."""
    for m in _WORD.finditer(text):
        if m.group(1) in _KNOWN:
            return m.group(1)
    return "refused"


def from_status(st: int, text: str) -> LanesError:
    """The LanesError of a library status and its failure text."""
    if st == _native.STATUS["LC_EREFUSED"]:
        return LanesError(daemon_word(text), text)
    return LanesError(_BY_NUMBER.get(st, "error"), text or _native.status_text(st))

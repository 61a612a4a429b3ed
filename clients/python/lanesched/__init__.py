"""lanesched - the Python client of lanesched, over the project's C client (clients/c) and nats.c.

    import lanesched
    with lanesched.connect("nats://127.0.0.1:4222") as client:
        client.submit("llama", [lanesched.Item(id="job-1", tokens=120, components=[system])])
        for batch in client.consumer("llama", max_batch_size=8, max_batch_tokens=4096):
            ...
            batch.ack()

See README.md beside this package and docs/clients.md.
"""

from ._native import NativeLibraryError, library_path
from .client import Client, Msg, Subscription, connect
from .consumer import PROTOCOL_VERSION, AckReply, Batch, BatchItem, Consumer, Registration
from .errors import LanesError, code_word
from .producer import Item, ItemResult, Producer, SubmitResult
from .shape import (
    EMPTY_SIGNATURE,
    check_model,
    shape_format,
    shape_hash,
    shape_parse,
    shape_sign,
    shape_sign_hashes,
)

__version__ = "0.1.0"

__all__ = [
    "AckReply",
    "Batch",
    "BatchItem",
    "Client",
    "Consumer",
    "EMPTY_SIGNATURE",
    "Item",
    "ItemResult",
    "LanesError",
    "Msg",
    "NativeLibraryError",
    "PROTOCOL_VERSION",
    "Producer",
    "Registration",
    "SubmitResult",
    "Subscription",
    "check_model",
    "code_word",
    "connect",
    "library_path",
    "shape_format",
    "shape_hash",
    "shape_parse",
    "shape_sign",
    "shape_sign_hashes",
]

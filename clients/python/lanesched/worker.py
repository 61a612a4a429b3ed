"""worker - lanesched-worker, the engine adapter: a lanesched consumer that turns each batch into
one request to an OpenAI-compatible /v1/completions endpoint (vLLM, SGLang, TGI, llama.cpp's
server: a list of prompts per request), publishes each item's result on its reply_to, acks what
succeeded and naks what failed (subjects.md, "Engine adapter payloads").

Invariants:
  1. One engine request per batch and parameter set: items whose parameters agree (the usual
     case: one shape, one producer) go in one request, prompts in batch order; items with other
     parameters go in a request of their own, in the order they first appear.
  2. An item is acked only after its result was published. An item that can never succeed is
     answered with its error and acked: a payload that breaks the convention, more tokens than
     --max-input-tokens, or a prompt the engine refuses alone as a bad request (HTTP 400, 413,
     422: a request of several prompts refused so is sent again one prompt at a time, so one bad
     prompt does not fail the others). Any other failure (another 4xx: a wrong URL, key or model
     name, which every item would meet; a reply without its choice; the engine still down when
     the batch's --engine-retry seconds are up) naks the item, so lanesched delivers it again
     and dead-letters it after --max-deliveries.
  3. While the engine works the batch is kept in progress: Ack.in_progress at the start and
     every third of ack_wait_ms (the C client's heartbeats name it too).
  4. The engine's text goes back unchanged; results are keyed by item id (a redelivered item is
     answered again: consumers of results keep the first per id).
  5. The engine's own outages (unreachable, connection cut, time-out, 5xx, 429) cost no
     deliveries while they last less than --engine-retry seconds from the batch's first request:
     its requests are retried with backoff while the batch is kept in progress (3), instead of a
     nak per attempt that would dead-letter the queue within a second of an engine restart.
     Past that, what is left of the batch is nak'd without being sent.
  6. A daemon that restarts, or NATS that drops, while a batch is worked does not stop the
     worker: a settle that gets no answer is logged and the batch released (no longer named in
     heartbeats), so the daemon delivers its items again (at least once); the consumer registers
     again by itself. Other client errors (NATS given up for good, out of memory) end the worker,
     for its supervisor to restart.

Rejected: one request per item (the engine batches again what lanesched already packed, and
loses the shape purity); chat completions (their list form is one conversation, not a batch of
prompts); streaming (a batch's results are published when the request ends).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .client import Client, connect
from .consumer import Batch, BatchItem, Consumer
from .errors import LanesError

log = logging.getLogger("lanesched.worker")

# Sampling parameters an item may set (the payload convention); anything else in "params" is
# passed through to the engine as it is.
PARAMS = ("max_tokens", "temperature", "top_p", "stop", "seed", "n", "presence_penalty", "frequency_penalty")


class PayloadError(ValueError):
    """An item's payload breaks the convention (subjects.md, "Engine adapter payloads")."""


@dataclass
class Request:
    """Items of one batch that share their parameters: one engine request."""

    params: Dict[str, Any]
    positions: List[int] = field(default_factory=list)
    prompts: List[str] = field(default_factory=list)


def payload_parse(payload: bytes) -> Tuple[str, Dict[str, Any]]:
    """The prompt and parameters of an item's payload: a JSON object with "prompt" (a string)
    and optionally "params" (an object) and the PARAMS keys beside it."""
    try:
        doc = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise PayloadError(f"payload is not UTF-8 JSON: {err}") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("prompt"), str):
        raise PayloadError('payload is not a JSON object with a "prompt" string')
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise PayloadError('"params" is not a JSON object')
    params = dict(params)
    for k in PARAMS:
        if k in doc:
            params[k] = doc[k]
    if params.get("n", 1) != 1:
        raise PayloadError('"n" other than 1 is not supported (one result per item)')
    params.pop("n", None)
    return doc["prompt"], params


def item_id_fields(item_id: bytes) -> Dict[str, str]:
    try:
        return {"id": item_id.decode("utf-8")}
    except UnicodeDecodeError:
        return {"id_base64": base64.b64encode(item_id).decode()}


def batch_plan(batch: Batch, default_params: Dict[str, Any],
               max_input_tokens: int = 0) -> Tuple[List[Request], Dict[int, str]]:
    """Invariant 1: the engine requests of a batch, and the positions that can never succeed
    (invariant 2) with the error each is answered with."""
    groups: Dict[str, Request] = {}
    bad: Dict[int, str] = {}
    for pos, item in enumerate(batch.items):
        try:
            prompt, params = payload_parse(item.payload)
        except PayloadError as err:
            bad[pos] = f"bad_payload: {err}"
            continue
        if max_input_tokens and item.tokens > max_input_tokens:
            bad[pos] = f"input_too_long: {item.tokens} tokens, the engine takes {max_input_tokens}"
            continue
        merged = {**default_params, **params}
        key = json.dumps(merged, sort_keys=True)
        req = groups.setdefault(key, Request(merged))
        req.positions.append(pos)
        req.prompts.append(prompt)
    return list(groups.values()), bad


class Engine:
    """An OpenAI-compatible completions endpoint."""

    def __init__(self, url: str, model: str, timeout: float = 300.0, api_key: Optional[str] = None) -> None:
        self.url = url.rstrip("/")
        if not self.url.endswith("/completions"):
            self.url += "/v1/completions" if not self.url.endswith("/v1") else "/completions"
        self.model = model
        self.timeout = timeout
        self.api_key = api_key

    def complete(self, prompts: Sequence[str], params: Dict[str, Any]) -> List[Dict[str, Any]]:
        """One request with every prompt; the choice of each prompt, in order. Raises on any
        failure (HTTP status, timeout, a reply that does not hold one choice per prompt)."""
        body = json.dumps({**params, "model": self.model, "prompt": list(prompts)}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            doc = json.loads(resp.read().decode("utf-8"))
        choices = doc.get("choices") if isinstance(doc, dict) else None
        if not isinstance(choices, list):
            raise ValueError("the engine's reply has no choices")
        out: List[Optional[Dict[str, Any]]] = [None] * len(prompts)
        for i, ch in enumerate(choices):
            idx = ch.get("index", i) if isinstance(ch, dict) else None
            if isinstance(idx, int) and 0 <= idx < len(out) and out[idx] is None:
                out[idx] = ch
        missing = [i for i, ch in enumerate(out) if ch is None]
        if missing:
            raise ValueError(f"the engine's reply has no choice for prompts {missing}")
        return out  # type: ignore[return-value]


# HTTP statuses that say the request itself is bad (invariant 2); the other 4xx (401, 403, 404,
# 405, ...) are the worker's configuration, which every item would meet.
REFUSED = (400, 413, 422)
# What an engine request can raise: HTTP and socket errors, a cut or garbled reply.
ENGINE_ERRORS = (OSError, ValueError, urllib.error.URLError, http.client.HTTPException)


def engine_error_kind(err: BaseException) -> str:
    """'refused' (the request's own fault: 400, 413, 422), 'outage' (the engine's state:
    unreachable, cut off, timed out, 5xx or 429: worth retrying), else 'failed'."""
    if isinstance(err, urllib.error.HTTPError):
        if err.code in REFUSED:
            return "refused"
        return "outage" if err.code >= 500 or err.code == 429 else "failed"
    if isinstance(err, (urllib.error.URLError, OSError, http.client.HTTPException)):
        return "outage"
    return "failed"


def engine_error_text(err: BaseException) -> str:
    """The error with the engine's own explanation (its body, cut short) when it sent one."""
    text = str(err)
    if isinstance(err, urllib.error.HTTPError):
        try:
            body = err.read(300).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            body = ""
        if body:
            text += ": " + body
    return text


@dataclass
class WorkerStats:
    batches: int = 0
    items: int = 0
    requests: int = 0
    acked: int = 0
    nacked: int = 0
    bad_payloads: int = 0
    engine_failures: int = 0
    engine_retries: int = 0
    engine_refused: int = 0
    results_published: int = 0
    bad_reply_to: int = 0
    settle_failures: int = 0


class Worker:
    """The adapter's loop on one consumer: see the module's invariants."""

    def __init__(self, client: Client, consumer: Consumer, engine: Engine, default_params: Optional[Dict[str, Any]] = None,
                 max_input_tokens: int = 0, engine_retry: float = 60.0) -> None:
        self.client = client
        self.consumer = consumer
        self.engine = engine
        self.default_params = dict(default_params or {})
        self.max_input_tokens = max_input_tokens
        self.engine_retry = engine_retry
        self.stats = WorkerStats()
        self.stop = threading.Event()

    def _complete(self, prompts: Sequence[str], params: Dict[str, Any], end: float) -> List[Dict[str, Any]]:
        """Invariant 5: the engine's choices, retrying its outages with backoff (0.25 s doubling
        to 5 s) until the batch's deadline `end` (time.monotonic()); raises the last error."""
        pause = 0.25
        while True:
            self.stats.requests += 1
            try:
                return self.engine.complete(prompts, params)
            except ENGINE_ERRORS as err:
                self.stats.engine_failures += 1
                if engine_error_kind(err) != "outage" or self.stop.is_set() or time.monotonic() + pause > end:
                    raise
                log.warning("engine unavailable (%s): retrying in %.2f s", engine_error_text(err), pause)
                self.stats.engine_retries += 1
                if self.stop.wait(pause):
                    raise
                pause = min(pause * 2, 5.0)

    def _serve(self, batch: Batch, positions: List[int], prompts: List[str], params: Dict[str, Any],
               ok: List[int], failed: List[int], end: float) -> None:
        """Invariant 2: one request, split one prompt at a time when the engine refuses it."""
        if time.monotonic() >= end or self.stop.is_set():  # invariant 5: the batch's time is up
            failed.extend(positions)
            return
        try:
            choices = self._complete(prompts, params, end)
        except ENGINE_ERRORS as err:
            kind = engine_error_kind(err)
            if kind == "refused" and len(prompts) > 1:
                for pos, prompt in zip(positions, prompts):
                    self._serve(batch, [pos], [prompt], params, ok, failed, end)
                return
            text = engine_error_text(err)
            log.warning("engine request for batch %d (%d prompts) failed: %s", batch.batch_id, len(prompts), text)
            if kind == "refused":  # this prompt alone: it can never succeed
                self.stats.engine_refused += 1
                self._publish(batch.items[positions[0]], {"error": f"engine_refused: {text}"})
                ok.append(positions[0])
            else:
                failed.extend(positions)
            return
        for pos, ch in zip(positions, choices):
            self._publish(batch.items[pos], {
                "text": ch.get("text", ""),
                "finish_reason": ch.get("finish_reason"),
                "model": self.engine.model,
            })
            ok.append(pos)

    def _publish(self, item: BatchItem, result: Dict[str, Any]) -> None:
        if not item.reply_to:
            return
        doc = {**item_id_fields(item.id), **result}
        try:
            self.client.publish(item.reply_to, json.dumps(doc).encode())
        except LanesError as err:
            if err.code != "bad_argument":
                raise
            # a reply_to that is no NATS subject (stored before the daemon refused them): the
            # result can go nowhere, and sending it would write the rest as protocol commands
            self.stats.bad_reply_to += 1
            log.warning("item %r: reply_to %r is not a subject: result not sent", item.id, item.reply_to)
            return
        self.stats.results_published += 1

    def _keep_alive(self, batch: Batch, done: threading.Event) -> None:
        """Invariant 3."""
        every = max(0.05, self.consumer.registration.ack_wait_ms / 3000.0)
        while not done.wait(every):
            try:
                batch.in_progress()
            except LanesError as err:
                log.warning("in_progress for batch %d: %s", batch.batch_id, err)

    def handle(self, batch: Batch) -> None:
        self.stats.batches += 1
        self.stats.items += len(batch)
        requests, bad = batch_plan(batch, self.default_params, self.max_input_tokens)
        ok: List[int] = []
        failed: List[int] = []
        for pos, error in bad.items():  # invariant 2: permanent, answered and acked
            self.stats.bad_payloads += 1
            self._publish(batch.items[pos], {"error": error})
            ok.append(pos)
        if requests:
            try:
                batch.in_progress()
            except LanesError as err:
                log.warning("in_progress for batch %d: %s", batch.batch_id, err)
            done = threading.Event()
            keeper = threading.Thread(target=self._keep_alive, args=(batch, done), daemon=True)
            keeper.start()
            end = time.monotonic() + self.engine_retry  # invariant 5: one deadline per batch
            try:
                for req in requests:
                    self._serve(batch, req.positions, req.prompts, req.params, ok, failed, end)
            finally:
                done.set()
                keeper.join()
        try:
            reply = batch.settle(ack=sorted(ok), nak=sorted(failed))
        except LanesError as err:  # invariant 6
            self.stats.settle_failures += 1
            log.warning("settling batch %d failed (%s): lanesched delivers its items again", batch.batch_id, err)
            batch.release()
            return
        if reply.code:
            log.warning("settling batch %d: %s", batch.batch_id, reply.error or reply.code)
        self.stats.acked += len(ok)
        self.stats.nacked += len(failed)

    def run(self, max_batches: int = 0, until_idle: float = 0.0) -> WorkerStats:
        last = time.monotonic()
        while not self.stop.is_set():
            if max_batches and self.stats.batches >= max_batches:
                break
            if until_idle and time.monotonic() - last >= until_idle:
                break
            try:
                b = self.consumer.next(0.5)
            except LanesError as err:  # invariant 6: the consumer registers again by itself
                if err.code not in ("timeout", "no_responders"):
                    raise
                log.warning("waiting for a batch: %s", err)
                self.stop.wait(0.5)
                continue
            if b is None:
                continue
            self.handle(b)
            last = time.monotonic()
        return self.stats


def _args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="lanesched-worker",
        description="A lanesched consumer that sends each batch to an OpenAI-compatible /v1/completions "
        "endpoint as one request and publishes each item's result on its reply_to.",
    )
    p.add_argument("--server", default=env("LANESCHED_SERVER", "nats://127.0.0.1:4222"), help="NATS URL(s), comma-separated")
    p.add_argument("--prefix", default=env("LANESCHED_PREFIX", "lanes"), help="lanesched's subject prefix")
    p.add_argument("--inbox-prefix", default=env("LANESCHED_INBOX_PREFIX"), help="custom inbox prefix (default _INBOX)")
    p.add_argument("--user", default=env("LANESCHED_USER"))
    p.add_argument("--password", default=env("LANESCHED_PASSWORD"))
    p.add_argument("--token", default=env("LANESCHED_TOKEN"))
    p.add_argument("--creds", default=env("LANESCHED_CREDS"), help="NATS .creds file")
    p.add_argument("--model", required=True, help="the lanesched model this worker serves")
    p.add_argument("--engine-url", default=env("LANESCHED_ENGINE_URL", "http://127.0.0.1:8000"),
                   help="the engine's base URL (…/v1/completions is added) or its completions URL")
    p.add_argument("--engine-model", help="model name sent to the engine (default: --model)")
    p.add_argument("--engine-timeout", type=float, default=300.0, help="seconds per engine request (default 300)")
    p.add_argument("--engine-retry", type=float, default=60.0,
                   help="seconds an unreachable, timing-out or 5xx/429 engine is retried before the batch's items are "
                        "nak'd (default 60; the batch is kept in progress meanwhile)")
    p.add_argument("--api-key", default=env("LANESCHED_ENGINE_API_KEY"), help="Bearer token for the engine")
    p.add_argument("--max-batch-size", type=int, required=True, help="the engine's max_num_seqs")
    p.add_argument("--max-batch-tokens", type=int, required=True, help="the engine's max_num_batched_tokens")
    p.add_argument("--max-input-tokens", type=int, default=0, help="the engine's max_model_len (0 = unlimited)")
    p.add_argument("--batch-fixed-us", type=int, default=0, help="the engine's fixed cost per batch, microseconds (0 = let lanesched estimate)")
    p.add_argument("--token-ns", type=int, default=0, help="its cost per padded token, nanoseconds")
    p.add_argument("--cache-shapes", type=int, default=0, help="prompt shapes its prefix cache keeps warm (0 = 1)")
    p.add_argument("--name", default="", help="this worker's name in lanesched's stats")
    p.add_argument("--max-tokens", type=int, default=None, help="default max_tokens for items that set none")
    p.add_argument("--prefetch", type=int, default=2, help="batches kept requested ahead")
    p.add_argument("--max-batches", type=int, default=0, help="exit after this many batches (0 = run until SIGTERM)")
    p.add_argument("--until-idle", type=float, default=0.0, help="exit after this many seconds without a batch")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = _args(argv)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING, format="lanesched-worker: %(message)s")
    try:
        client = connect(a.server, prefix=a.prefix, inbox_prefix=a.inbox_prefix, user=a.user, password=a.password,
                         token=a.token, creds_file=a.creds, name=f"lanesched-worker {a.name}".strip())
        consumer = client.consumer(
            a.model, max_batch_size=a.max_batch_size, max_batch_tokens=a.max_batch_tokens,
            max_input_tokens=a.max_input_tokens, name=a.name, batch_fixed_us=a.batch_fixed_us,
            token_ns=a.token_ns, cache_shapes=a.cache_shapes, prefetch=a.prefetch)
    except LanesError as err:
        print(f"lanesched-worker: {err}", file=sys.stderr)
        return 2
    defaults = {} if a.max_tokens is None else {"max_tokens": a.max_tokens}
    w = Worker(client, consumer, Engine(a.engine_url, a.engine_model or a.model, a.engine_timeout, a.api_key), defaults,
               max_input_tokens=a.max_input_tokens, engine_retry=a.engine_retry)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: w.stop.set())
    log.info("registered %s for %s; engine %s", consumer.id, a.model, w.engine.url)
    stats = w.run(a.max_batches, a.until_idle)
    client.close()
    if a.json:
        print(json.dumps(stats.__dict__))
    else:
        print("lanesched-worker: " + ", ".join(f"{k} {v}" for k, v in stats.__dict__.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

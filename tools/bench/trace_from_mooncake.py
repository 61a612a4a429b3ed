#!/usr/bin/env python3
"""trace_from_mooncake.py - a request trace in the Mooncake / Kimi format (FAST'25 artifact: JSON
lines {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]},
where hash_ids are the ids of the prompt's blocks of --block tokens and equal ids mean equal
content including everything before it) into lanesched-bench's trace v2, for `sim --trace-in`
and `sweep --trace-in`.

What a producer would send for each request, as subjects.md defines the fields:
  shape          the first --lead blocks of the prompt (their ids): what the producer hashes
                 into the signature, the prefix an engine can keep warm for the shape
  prefix_tokens  the tokens those blocks cover (--lead x --block, the prompt's length when
                 shorter): one value per shape, never more than the signature covers. A longer
                 prefix two requests happen to share (a conversation's earlier turns) is not the
                 shape's: a producer cannot know it when it hashes, and the sim would price it
                 as the shape's on every miss.
  tokens         the rest of the prompt (at least 1): what every item computes
Requests whose prompt has no block (hash_ids empty) are each their own shape with no prefix.

Usage: trace_from_mooncake.py IN.jsonl OUT.trace [--lead N] [--block N] [--time-scale F]
  --lead N        blocks the signature covers (default 1: the system prompt's first block)
  --block N       tokens per block of hash_ids (default 512, the artifact's)
  --time-scale F  multiply the arrival times by F (> 1 spreads them: a lower load on the sim's
                  workers; default 1)
One model (model 0). Prints the shapes, the items and the offered load on the sim's default
workers (2, 5 ms + 10 us per padded token, 32 items / 16,384 tokens per batch), each item
costed in a full batch of its own length and its prefix once per batch of it: a floor.
"""
import argparse
import hashlib
import json
import sys

BATCH_NS, TOKEN_NS, BATCH_ITEMS, BATCH_TOKENS, WORKERS = 5_000_000, 10_000, 32, 16384, 2


def signature(key):
    """A nonzero 64-bit signature of the shape's block ids (stable across runs)."""
    h = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") or 1


def convert(lines, lead, block, time_scale):
    """Items (t_ns, shape index, signature, tokens, prefix) in arrival order, and the shapes."""
    rows = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
            t_ms, length, ids = float(r["timestamp"]), int(r["input_length"]), r["hash_ids"]
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit("line %d: not a Mooncake request (%s): %s" % (n, e, line[:80]))
        if length <= 0 or t_ms < 0:
            raise SystemExit("line %d: input_length and timestamp must be positive" % n)
        rows.append((t_ms, n, length, list(ids)))
    rows.sort()
    shapes, items = {}, []
    t0 = rows[0][0] if rows else 0.0
    for t_ms, n, length, ids in rows:
        k = min(lead, len(ids))
        key = tuple(ids[:k]) if k else ("request", n)
        prefix = min(k * block, length - 1) if k else 0
        if key not in shapes:
            shapes[key] = (len(shapes), signature(key))
        idx, sig = shapes[key]
        t_ns = int(round((t_ms - t0) * time_scale * 1e6))
        items.append((t_ns, idx, sig, length - prefix, prefix))
    return items, shapes


def offered(items):
    """The workers' share the items ask for (a floor: full batches, one prefix per batch)."""
    if len(items) < 2:
        return 0.0
    work = 0.0
    for _, _, _, tokens, prefix in items:
        per = max(1, min(BATCH_ITEMS, BATCH_TOKENS // tokens)) if tokens <= BATCH_TOKENS else 1
        work += TOKEN_NS * tokens + (BATCH_NS + TOKEN_NS * prefix) / per
    span = max(1, items[-1][0] - items[0][0])
    return work / (span * WORKERS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--lead", type=int, default=1)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--time-scale", type=float, default=1.0)
    a = ap.parse_args()
    if a.lead < 1 or a.block < 1 or a.time_scale <= 0:
        ap.error("--lead and --block must be at least 1, --time-scale positive")
    with open(a.input) as f:
        items, shapes = convert(f, a.lead, a.block, a.time_scale)
    if not items:
        raise SystemExit("%s: no requests" % a.input)
    dur = max(items[-1][0], 1) / 1e9
    with open(a.output, "w") as f:
        f.write("lanesched-bench-trace v2 preset=mooncake seed=0 models=1 shapes_per_model=%d "
                "duration_s=%.3f rate=%.3f items=%d\n" % (len(shapes), dur, len(items) / dur,
                                                          len(items)))
        f.write("# t_ns model shape signature tokens prefix_tokens (from %s, --lead %d "
                "--block %d --time-scale %g)\n" % (a.input, a.lead, a.block, a.time_scale))
        for t_ns, idx, sig, tokens, prefix in items:
            f.write("%d 0 %d %016x %d %d\n" % (t_ns, idx, sig, tokens, prefix))
    print("%s: %d items, %d shapes, %.1f s, offered load %.0f%% of 2 workers (a floor)"
          % (a.output, len(items), len(shapes), dur, 100 * offered(items)))


if __name__ == "__main__":
    sys.exit(main())

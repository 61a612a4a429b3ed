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
  tokens         the rest of the prompt (at least 1): what every item computes, capped at
                 --max-tokens
Requests whose prompt has no block (hash_ids empty) are each their own shape with no prefix.

Usage: trace_from_mooncake.py IN.jsonl OUT.trace [--lead N] [--block N] [--time-scale F]
                                [--max-tokens N]
  --lead N        blocks the signature covers (default 1: the system prompt's first block)
  --block N       tokens per block of hash_ids (default 512, the artifact's)
  --time-scale F  multiply the arrival times by F (> 1 spreads them: a lower load on the sim's
                  workers; default 1)
  --max-tokens N  the most tokens an item keeps, longer ones cut to it and counted (default
                  32,768: the bench's workers' max_input_tokens, above which lanesched rejects
                  an item as input_too_long while the sim would serve it; trace_from_csv.py's
                  rule)
One model (model 0). Prints the shapes, the items and the offered load on the sim's default
workers (2, 5 ms + 10 us per padded token, 32 items / 16,384 tokens per batch), each item
costed in a full batch of its own length and its prefix once per batch of it: a floor.
"""
import argparse
import json
import sys

from trace_v2 import offered, signature, write


def convert(lines, lead, block, time_scale, max_tokens=32768):
    """Items (t_ns, model 0, shape index, signature, tokens, prefix) in arrival order, the
    shapes, and how many items were cut to max_tokens."""
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
    shapes, items, cut = {}, [], 0
    t0 = rows[0][0] if rows else 0.0
    for t_ms, n, length, ids in rows:
        k = min(lead, len(ids))
        key = tuple(ids[:k]) if k else ("request", n)
        prefix = min(k * block, length - 1) if k else 0
        if key not in shapes:
            shapes[key] = (len(shapes), signature(key))
        idx, sig = shapes[key]
        t_ns = int(round((t_ms - t0) * time_scale * 1e6))
        tokens = length - prefix
        if tokens > max_tokens:
            tokens, cut = max_tokens, cut + 1
        items.append((t_ns, 0, idx, sig, tokens, prefix))
    return items, shapes, cut


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--lead", type=int, default=1)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=32768)
    a = ap.parse_args()
    if a.lead < 1 or a.block < 1 or a.time_scale <= 0 or a.max_tokens < 1:
        ap.error("--lead, --block and --max-tokens must be at least 1, --time-scale positive")
    with open(a.input) as f:
        items, shapes, cut = convert(f, a.lead, a.block, a.time_scale, a.max_tokens)
    if not items:
        raise SystemExit("%s: no requests" % a.input)
    dur = write(a.output, items, "mooncake", 1, len(shapes),
                "from %s, --lead %d --block %d --time-scale %g --max-tokens %d"
                % (a.input, a.lead, a.block, a.time_scale, a.max_tokens))
    print("%s: %d items, %d shapes, %.1f s, %d cut to %d tokens, offered load %.0f%% of 2 "
          "workers (a floor)" % (a.output, len(items), len(shapes), dur, cut, a.max_tokens,
                                 100 * offered(items)))


if __name__ == "__main__":
    sys.exit(main())

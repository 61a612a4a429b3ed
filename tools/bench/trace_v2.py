"""trace_v2.py - what the trace converters share: lanesched-bench's trace v2 file (a header
line, a comment line, then "t_ns model shape signature tokens prefix_tokens" per item), stable
shape signatures, and the offered load on the sim's default workers. Imported by
trace_from_mooncake.py and trace_from_csv.py.
"""
import hashlib

# The sim's default workers (docs/bench.md): 2 per model, 5 ms + 10 us per padded token,
# 32 items / 16,384 padded tokens per batch.
BATCH_NS, TOKEN_NS, BATCH_ITEMS, BATCH_TOKENS, WORKERS = 5_000_000, 10_000, 32, 16384, 2


def signature(key):
    """A nonzero 64-bit signature of a shape's key (stable across runs)."""
    h = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") or 1


def offered(items, models=1):
    """The workers' share items (t_ns, model, shape, signature, tokens, prefix) ask for: each
    costed in a full batch of its own length and its prefix once per batch, a floor."""
    if len(items) < 2:
        return 0.0
    work = 0.0
    for _, _, _, _, tokens, prefix in items:
        per = max(1, min(BATCH_ITEMS, BATCH_TOKENS // tokens)) if tokens <= BATCH_TOKENS else 1
        work += TOKEN_NS * tokens + (BATCH_NS + TOKEN_NS * prefix) / per
    span = max(1, items[-1][0] - items[0][0])
    return work / (span * WORKERS * models)


def write(path, items, preset, models, shapes_per_model, comment):
    """Items (t_ns, model, shape, signature, tokens, prefix), in arrival order, as trace v2."""
    dur = max(items[-1][0], 1) / 1e9
    with open(path, "w") as f:
        f.write("lanesched-bench-trace v2 preset=%s seed=0 models=%d shapes_per_model=%d "
                "duration_s=%.3f rate=%.3f items=%d\n" % (preset, models, shapes_per_model, dur,
                                                          len(items) / dur, len(items)))
        f.write("# t_ns model shape signature tokens prefix_tokens (%s)\n" % comment)
        for t_ns, model, shape, sig, tokens, prefix in items:
            f.write("%d %d %d %016x %d %d\n" % (t_ns, model, shape, sig, tokens, prefix))
    return dur

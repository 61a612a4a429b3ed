#!/usr/bin/env python3
"""traces_unlike.py - traces lanesched-bench's generator cannot make, in its trace v2 format
(header line, comment line, then "t_ns model shape signature tokens prefix_tokens" per item),
for `lanesched-bench sim --trace-in` and `sweep --trace-in`, standing in for public production
traces (each shape's prefix drawn log-uniformly from 256-4096 tokens, seeded):

  heavy.trace   Pareto lengths (x_min 40, alpha 1.3, capped at 32,768), 200 shapes per model at
                Zipf 0.8, 2 models, arrivals in bursts of 8x (1-3 s every ~8 s), 60 s
  hashed.trace  a producer hashing whole prompts: every item its own shape, 400 items/s of
                log-normal lengths (median 300), one model, 30 s (no prefix: nothing is shared)
  diurnal.trace 4 models of unequal traffic (shares 8:4:2:1), 24 shapes per model at Zipf 1.4,
                lengths bimodal (chat turns median 150, documents median 2,500, 20% of them),
                a rate that swings 0.4x-1.6x along a 40 s cycle, 80 s

Usage: tools/bench/traces_unlike.py DIR [BASE_RATE]   (seeded: the same files every time)
docs/bench.md ("Traces unlike the presets") has the figures.
"""
import math
import random
import sys


def write(path, items, models, shapes, name, prefixes=True):
    items.sort()
    dur = items[-1][0] / 1e9
    prefix = {}
    with open(path, "w") as f:
        f.write("lanesched-bench-trace v2 preset=%s seed=7 models=%d shapes_per_model=%d "
                "zipf_s=0 duration_s=%.3f rate=%.3f burst_factor=1 churn=0 max_tokens=32768 "
                "long_share=0 items=%d\n" % (name, models, shapes, dur, len(items) / dur,
                                             len(items)))
        f.write("# t_ns model shape signature tokens prefix_tokens\n")
        for t, m, sh, tok in items:
            sig = ((0x9E3779B97F4A7C15 * (sh + 1)) & 0xFFFFFFFFFFFFFFFF) | 1  # never 0
            if sh not in prefix:  # the shape's own stream: the same whatever the arrivals
                prefix[sh] = int(256 * 16 ** random.Random(sh * 7919 + 17).random()) \
                    if prefixes else 0
            f.write("%d %d %d %016x %d %d\n" % (t, m, sh, sig, tok, prefix[sh]))


def heavy(rng, rate, path):
    models, per_model = 2, 200
    weights = [1 / (k + 1) ** 0.8 for k in range(per_model)]
    total, acc, cdf = sum(weights), 0.0, []
    for w in weights:
        acc += w / total
        cdf.append(acc)
    items, t, end = [], 0.0, 60.0
    burst_until, next_burst = 0.0, rng.expovariate(1 / 8.0)
    while t < end:
        in_burst = t < burst_until
        t += rng.expovariate(rate * (8 if in_burst else 1))
        if t >= next_burst and not in_burst:
            burst_until = t + rng.uniform(1, 3)
            next_burst = burst_until + rng.expovariate(1 / 8.0)
        m = rng.randrange(models)
        u = rng.random()
        k = next(i for i, c in enumerate(cdf) if c >= u)
        tokens = int(min(32768, 40 * (1 - rng.random()) ** (-1 / 1.3)))
        items.append((int(t * 1e9), m, m * per_model + k, max(1, tokens)))
    write(path, items, models, per_model, "heavy-tailed")


def hashed(rng, path):
    items, t = [], 0.0
    while t < 30.0:
        t += rng.expovariate(400.0)
        tokens = int(rng.lognormvariate(math.log(300), 0.6)) + 1
        items.append((int(t * 1e9), 0, len(items), tokens))
    write(path, items, 1, len(items), "hashed-prompts", prefixes=False)


def diurnal(rng, rate, path):
    models, per_model, share = 4, 24, [8, 4, 2, 1]
    weights = [1 / (k + 1) ** 1.4 for k in range(per_model)]
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    mcdf, acc = [], 0.0
    for w in share:
        acc += w / sum(share)
        mcdf.append(acc)
    items, t, end, peak = [], 0.0, 80.0, 1.6
    while True:
        t += rng.expovariate(rate * peak)  # thinning against the peak rate
        if t >= end:
            break
        if rng.random() * peak > 1.0 + 0.6 * math.sin(2 * math.pi * t / 40.0):
            continue
        u = rng.random()
        m = next(i for i, c in enumerate(mcdf) if c >= u)
        u = rng.random()
        k = next(i for i, c in enumerate(cdf) if c >= u)
        doc = rng.random() < 0.2
        tokens = int(rng.lognormvariate(math.log(2500 if doc else 150), 0.5 if doc else 0.7)) + 1
        items.append((int(t * 1e9), m, m * per_model + k, min(tokens, 32768)))
    write(path, items, models, per_model, "diurnal")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rng = random.Random(7)
    heavy(rng, float(sys.argv[2]) if len(sys.argv) > 2 else 150.0, sys.argv[1] + "/heavy.trace")
    hashed(rng, sys.argv[1] + "/hashed.trace")
    diurnal(rng, 300.0, sys.argv[1] + "/diurnal.trace")


if __name__ == "__main__":
    main()

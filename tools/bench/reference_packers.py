#!/usr/bin/env python3
"""Reference packers: what two freer packers than any of lanesched-bench's policies do on a trace.

Reads trace v1 files (lanesched-bench sim --trace-out; header line, then
`t_ns model shape signature tokens`) and replays them, per model, on the sim's workers and
service model (fixed cost per batch + cost per padded token, the contract's item and padded-token
limits, pad_to the longest item rounded up to 8). Every dispatch is work-conserving: a free
worker takes a batch at once. Two references, printed with p50/p99 wait, GPU seconds, waste and
items per batch:

  ideal          FIFO over all of the model's items, no shape purity, no padding at all (cost on
                 real tokens): below what any shape-pure, padded packer can spend.
  nearest T      the model's oldest item, then the queued items of its shape nearest to it in
                 length, either side, while each adds at most T padded tokens: a packer free to
                 take any subset of a shape's queue, which rolling lanes are not.

They answer whether a claim is out of reach of packing alone (the capacity and waste
claims; docs/bench.md, "How far packing alone goes"). Not a policy of the scheduler: nothing here holds items back.
--check exits 1 unless every item was dispatched exactly once and the padded references spent at
least the sim's floor (shape-pure batches full to the contract, padded only by the rounding).
"""
import argparse
import bisect
import heapq
import sys

PAD = 8


def pad(tokens):
    return (tokens + PAD - 1) // PAD * PAD


def read_trace(path):
    models = {}
    with open(path) as f:
        head = f.readline()
        if not head.startswith("lanesched-bench-trace v1"):
            sys.exit(f"{path}: not a trace v1 file (header: {head.strip()!r})")
        for n, line in enumerate(f, 2):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 5:
                sys.exit(f"{path}:{n}: expected 5 fields, got {len(parts)}")
            t, m, shape, _sig, tokens = parts
            models.setdefault(m, []).append((int(t), shape, int(tokens)))
    for items in models.values():
        items.sort()
    return models


class Stats:
    def __init__(self):
        self.waits, self.busy_ns, self.padded, self.real, self.batches = [], 0.0, 0, 0, 0

    def batch(self, start, taken, padded, real, a):
        for t in taken:
            self.waits.append(start - t)
        self.batches += 1
        self.padded += padded
        self.real += real
        d = a.batch_us * 1e3 + a.ns_per_token * padded
        self.busy_ns += d
        return d


def run_ideal(items, a, st):
    free = [0.0] * a.workers
    i, n = 0, len(items)
    while i < n:
        w = min(range(a.workers), key=free.__getitem__)
        start = max(free[w], items[i][0])
        j, s = i, 0
        while (j < n and j - i < a.batch_size and items[j][0] <= start
               and s + items[j][2] <= a.batch_tokens):
            s += items[j][2]
            j += 1
        if j == i:
            j, s = i + 1, items[i][2]
        free[w] = start + st.batch(start, [x[0] for x in items[i:j]], s, s, a)
        i = j


def run_nearest(items, a, st, T):
    free = [0.0] * a.workers
    sorted_by_len = {}  # shape -> sorted [(tokens, t, seq)]
    oldest = []  # heap of (t, seq, shape, tokens); lazily deleted
    taken = set()
    i, n, left, seq = 0, len(items), len(items), 0
    while left:
        w = min(range(a.workers), key=free.__getitem__)
        start = free[w]
        while oldest and oldest[0][1] in taken:
            heapq.heappop(oldest)
        if not oldest:
            start = max(start, items[i][0])
        while i < n and items[i][0] <= start:
            t, shape, tok = items[i]
            bisect.insort(sorted_by_len.setdefault(shape, []), (tok, t, seq))
            heapq.heappush(oldest, (t, seq, shape, tok))
            i, seq = i + 1, seq + 1
        while oldest[0][1] in taken:
            heapq.heappop(oldest)
        t0, s0, shape, tok0 = oldest[0]
        q = sorted_by_len[shape]
        k = bisect.bisect_left(q, (tok0, t0, s0))
        lo, hi, longest = k, k + 1, tok0
        while hi - lo < a.batch_size:
            best = None
            if lo > 0:
                best = (pad(longest) - q[lo - 1][0], 0, longest)
            if hi < len(q):
                nl = max(longest, q[hi][0])
                cost = (hi - lo) * (pad(nl) - pad(longest)) + pad(nl) - q[hi][0]
                if best is None or cost < best[0]:
                    best = (cost, 1, nl)
            if best is None or best[0] > T or (hi - lo + 1) * pad(best[2]) > a.batch_tokens:
                break
            if best[1] == 0:
                lo -= 1
            else:
                hi, longest = hi + 1, best[2]
        batch = q[lo:hi]
        del q[lo:hi]
        for x in batch:
            taken.add(x[2])
        left -= len(batch)
        real = sum(x[0] for x in batch)
        padded = len(batch) * pad(longest)
        free[w] = start + st.batch(start, [x[1] for x in batch], padded, real, a)


def floor_ns(models, a):
    total = 0.0
    for items in models.values():
        by_shape = {}
        for _t, shape, tok in items:
            c = by_shape.setdefault(shape, [0, 0])
            c[0] += 1
            c[1] += pad(tok)
        for count, padded in by_shape.values():
            batches = max(-(-count // a.batch_size), -(-padded // a.batch_tokens))
            total += padded * a.ns_per_token + batches * a.batch_us * 1e3
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--workers", type=int, default=2, help="workers per model (sim: 2)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batch-tokens", type=int, default=16384)
    p.add_argument("--batch-us", type=float, default=5000.0)
    p.add_argument("--ns-per-token", type=float, default=10000.0)
    p.add_argument("--thresholds", default="16,32,64,128,256,512",
                   help="T of the nearest-length packer, padded tokens (comma list)")
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    ok = True
    for path in a.traces:
        models = read_trace(path)
        count = sum(len(v) for v in models.values())
        floor = floor_ns(models, a)
        print(f"{path}: {count} items, {len(models)} models; the sim's GPU floor {floor / 1e9:.1f} s")
        print(f"  {'reference':<12} {'p50':>8} {'p99':>8} {'gpu.s':>8} {'waste%':>7} {'items/b':>8}")
        runs = [("ideal", None)] + [(f"nearest {t}", int(t)) for t in a.thresholds.split(",")]
        for name, T in runs:
            st = Stats()
            for items in models.values():
                (run_ideal(items, a, st) if T is None else run_nearest(items, a, st, T))
            w = sorted(st.waits)
            q = lambda f: w[min(len(w) - 1, int(f * len(w)))] / 1e9 if w else 0.0
            waste = 100.0 * (st.padded - st.real) / st.padded if st.padded else 0.0
            print(f"  {name:<12} {q(0.5):>7.2f}s {q(0.99):>7.2f}s {st.busy_ns / 1e9:>8.1f} "
                  f"{waste:>7.2f} {len(w) / max(st.batches, 1):>8.2f}")
            if len(w) != count:
                print(f"  check: {name} dispatched {len(w)} of {count} items")
                ok = False
            if T is not None and st.busy_ns < floor * (1 - 1e-9):
                print(f"  check: {name} spent {st.busy_ns / 1e9:.1f} s, under the floor")
                ok = False
    if a.check and not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()

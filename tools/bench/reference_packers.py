#!/usr/bin/env python3
"""Reference packers: what packers freer than any of lanesched-bench's policies do on a trace.

Reads trace files (lanesched-bench sim --trace-out; v1 or v2: a header line, then
`t_ns model shape signature tokens [prefix_tokens]`) and replays them, per model, on the sim's
workers and service model (fixed cost per batch + cost per padded token, a shape's prefix
computed once per batch when the worker's LRU cache of --cache-shapes shapes does not hold it,
the contract's item and padded-token limits, pad_to the longest item rounded up to 8). A free
worker takes the next batch; the references, printed with p50/p99 wait, GPU seconds, waste and
items per batch:

  ideal          FIFO over all of the model's items, no shape purity, no padding at all (cost on
                 real tokens; a batch of several shapes pays each one's prefix): below what any
                 shape-pure, padded packer can spend, at once.
  nearest T      the model's oldest item, then the queued items of its shape nearest to it in
                 length, either side, while each adds at most T padded tokens: a packer free to
                 take any subset of a shape's queue, which rolling lanes are not.
  nearest T @ H  (--hold-ms H) the same, but a batch that is not full waits for company until
                 its oldest item waited H: the freest shape-pure packer at a wait budget (run it
                 with H the share of the budget the policy under test may wait, and read its p99
                 against the budget). Any shape whose nearest batch is full goes first.

They answer whether a claim is out of reach of packing alone (the capacity, waste and budget
claims; docs/bench.md, "How far packing alone goes"). Not policies of the scheduler.
--check exits 1 unless every item was dispatched exactly once and the padded references spent at
least the sim's floor (shape-pure batches full to the contract, padded only by the rounding,
each shape's prefix once).
"""
import argparse
import bisect
import heapq
import sys

PAD = 8


def pad(tokens):
    return (tokens + PAD - 1) // PAD * PAD


def read_trace(path):
    models, prefix = {}, {}
    with open(path) as f:
        head = f.readline()
        version = head.split()[1] if head.startswith("lanesched-bench-trace ") else ""
        if version not in ("v1", "v2"):
            sys.exit(f"{path}: not a trace v1 or v2 file (header: {head.strip()!r})")
        want = 5 if version == "v1" else 6
        for n, line in enumerate(f, 2):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split()
            if len(parts) != want:
                sys.exit(f"{path}:{n}: expected {want} fields, got {len(parts)}")
            t, m, shape, _sig, tokens = parts[:5]
            p = int(parts[5]) if want == 6 else 0
            prefix[shape] = max(prefix.get(shape, 0), p)
            models.setdefault(m, []).append((int(t), shape, int(tokens)))
    for items in models.values():
        items.sort()
    return models, prefix


class Stats:
    def __init__(self, a, prefix):
        self.a, self.prefix = a, prefix
        self.waits, self.busy_ns, self.padded, self.real, self.batches, self.hits = \
            [], 0.0, 0, 0, 0, 0
        self.prefix_ns = 0.0

    def batch(self, cache, start, taken, shapes, padded, real):
        """One batch on a worker whose LRU is `cache` (most recent last); returns its time."""
        a = self.a
        distinct = list(dict.fromkeys(shapes))
        hit = len(distinct) == 1 and distinct[0] in cache
        if a.cache == "ideal":  # a worker pays a shape's prefix once, the first time
            pre = sum(self.prefix.get(s, 0) for s in distinct if s not in cache)
            cache.extend(s for s in distinct if s not in cache)
            return self.account(hit, pre, taken, start, padded, real)
        pre = 0 if hit else sum(self.prefix.get(s, 0) for s in distinct)
        for s in distinct:
            if s in cache:
                cache.remove(s)
            cache.append(s)
            if len(cache) > a.cache_shapes:
                cache.pop(0)
        return self.account(hit, pre, taken, start, padded, real)

    def account(self, hit, pre, taken, start, padded, real):
        for t in taken:
            self.waits.append(start - t)
        a = self.a
        self.batches += 1
        self.hits += hit
        self.padded += padded
        self.real += real
        d = a.batch_us * 1e3 + a.ns_per_token * (padded + pre)
        self.busy_ns += d
        self.prefix_ns += a.ns_per_token * pre
        return d


def run_ideal(items, a, st):
    free, caches = [0.0] * a.workers, [[] for _ in range(a.workers)]
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
        batch = items[i:j]
        free[w] = start + st.batch(caches[w], start, [x[0] for x in batch],
                                   [x[1] for x in batch], s, s)
        i = j


def nearest_batch(q, k, a, T):
    """The items of sorted queue q nearest in length to q[k]: (lo, hi, longest, full)."""
    tok0 = q[k][0]
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
        if best is None or best[0] > T:
            return lo, hi, longest, False
        if (hi - lo + 1) * pad(best[2]) > a.batch_tokens:
            return lo, hi, longest, True
        if best[1] == 0:
            lo -= 1
        else:
            hi, longest = hi + 1, best[2]
    return lo, hi, longest, True


def run_nearest(items, a, st, T, hold_ns=0):
    free, caches = [0.0] * a.workers, [[] for _ in range(a.workers)]
    by_len = {}  # shape -> sorted [(tokens, t, seq)]
    oldest = {}  # shape -> heap of (t, seq, tokens); lazily deleted
    taken = set()
    i, n, left, seq = 0, len(items), len(items), 0

    def admit(until):
        nonlocal i, seq
        while i < n and items[i][0] <= until:
            t, shape, tok = items[i]
            bisect.insort(by_len.setdefault(shape, []), (tok, t, seq))
            heapq.heappush(oldest.setdefault(shape, []), (t, seq, tok))
            i, seq = i + 1, seq + 1

    def head(shape):
        h = oldest.get(shape)
        while h and h[0][1] in taken:
            heapq.heappop(h)
        return h[0] if h else None

    while left:
        w = min(range(a.workers), key=free.__getitem__)
        start = free[w]
        admit(start)
        while True:
            heads = [(h, s) for s in oldest for h in [head(s)] if h is not None]
            if not heads:
                start = max(start, items[i][0])
                admit(start)
                continue
            (t0, s0, tok0), shape = min(heads)
            pick = None
            if hold_ns and start < t0 + hold_ns:
                for (th, sh, tokh), sshape in sorted(heads):  # a full batch goes first
                    q = by_len[sshape]
                    lo, hi, longest, full = nearest_batch(q, bisect.bisect_left(q, (tokh, th, sh)),
                                                          a, T)
                    if full:
                        pick = (sshape, lo, hi, longest)
                        break
                if pick is None:  # wait for company, an arrival, or the oldest to be due
                    nxt = t0 + hold_ns
                    if i < n and items[i][0] < nxt:
                        nxt = items[i][0]
                    start = nxt
                    admit(start)
                    continue
            if pick is None:
                q = by_len[shape]
                lo, hi, longest, _ = nearest_batch(q, bisect.bisect_left(q, (tok0, t0, s0)), a, T)
                pick = (shape, lo, hi, longest)
            break
        shape, lo, hi, longest = pick
        q = by_len[shape]
        batch = q[lo:hi]
        del q[lo:hi]
        for x in batch:
            taken.add(x[2])
        left -= len(batch)
        real = sum(x[0] for x in batch)
        free[w] = start + st.batch(caches[w], start, [x[1] for x in batch], [shape] * len(batch),
                                   len(batch) * pad(longest), real)


def floor_ns(models, prefix, a):
    total = 0.0
    for items in models.values():
        by_shape = {}
        for _t, shape, tok in items:
            c = by_shape.setdefault(shape, [0, 0])
            c[0] += 1
            c[1] += pad(tok)
        for shape, (count, padded) in by_shape.items():
            batches = max(-(-count // a.batch_size), -(-padded // a.batch_tokens))
            total += (padded + prefix.get(shape, 0)) * a.ns_per_token + batches * a.batch_us * 1e3
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--workers", type=int, default=2, help="workers per model (sim: 2)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batch-tokens", type=int, default=16384)
    p.add_argument("--batch-us", type=float, default=5000.0)
    p.add_argument("--ns-per-token", type=float, default=10000.0)
    p.add_argument("--cache-shapes", type=int, default=2)
    p.add_argument("--cache", choices=("lru", "ideal"), default="lru",
                   help="lru: the sim's LRU of --cache-shapes; ideal: every worker holds every "
                        "shape it served (a prefix is paid once per worker and shape: freer than "
                        "any cache)")
    p.add_argument("--thresholds", default="16,32,64,128,256,512",
                   help="T of the nearest-length packer, padded tokens (comma list)")
    p.add_argument("--hold-ms", default="",
                   help="also run each T holding for company up to these waits (comma list, ms)")
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    ok = True
    for path in a.traces:
        models, prefix = read_trace(path)
        count = sum(len(v) for v in models.values())
        floor = floor_ns(models, prefix, a)
        print(f"{path}: {count} items, {len(models)} models; the sim's GPU floor {floor / 1e9:.1f} s")
        print(f"  {'reference':<20} {'p50':>8} {'p99':>8} {'gpu.s':>8} {'waste%':>7} {'items/b':>8}"
              f" {'hit%':>7} {'prefix.s':>8}")
        ts = [int(t) for t in a.thresholds.split(",") if t]
        holds = [float(h) for h in a.hold_ms.split(",") if h]
        runs = [("ideal", None, 0)] + [(f"nearest {t}", t, 0) for t in ts]
        runs += [(f"nearest {t} @ {h:g} ms", t, int(h * 1e6)) for h in holds for t in ts]
        for name, T, hold in runs:
            st = Stats(a, prefix)
            for items in models.values():
                (run_ideal(items, a, st) if T is None else run_nearest(items, a, st, T, hold))
            w = sorted(st.waits)
            q = lambda f: w[min(len(w) - 1, int(f * (len(w) - 1)))] / 1e9 if w else 0.0
            waste = 100.0 * (st.padded - st.real) / st.padded if st.padded else 0.0
            print(f"  {name:<20} {q(0.5):>7.2f}s {q(0.99):>7.2f}s {st.busy_ns / 1e9:>8.1f} "
                  f"{waste:>7.2f} {len(w) / max(st.batches, 1):>8.2f} "
                  f"{100.0 * st.hits / max(st.batches, 1):>7.2f} {st.prefix_ns / 1e9:>8.1f}")
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

#!/usr/bin/env python3
"""trace_from_csv.py - a public LLM request log in CSV into lanesched-bench's trace v2, for
`sim --trace-in` and `sweep --trace-in`. Two layouts, told apart by their header:
  Azure LLM inference traces (2023, 2024): TIMESTAMP,ContextTokens,GeneratedTokens, the time
      as "YYYY-MM-DD HH:MM:SS.fffffff"; one model.
  BurstGPT: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type, the time in
      seconds from the log's start; a model per distinct Model value (in order of first use).

What a producer would send for each request, as subjects.md defines the fields, from what such
a log holds (lengths, no prompt content):
  shape          one per model (the log says nothing of shared prefixes; a producer that signs
                 its system prompt would have a few per model, each a lane family of its own)
  prefix_tokens  0 (unknown)
  tokens         the prompt's tokens (ContextTokens, Request tokens), capped at --max-tokens;
                 requests with no prompt tokens are left out and counted (a request that failed
                 after its prompt was read still asked for its prefill, and is kept)

Usage: trace_from_csv.py IN.csv OUT.trace [--time-scale F] [--max-tokens N] [--limit N]
  --time-scale F  multiply the arrival times by F (> 1 spreads them: a lower load on the sim's
                  workers; default 1)
  --max-tokens N  longest prompt kept, longer ones cut to it and counted (default 32,768: the
                  sim's default contract's max input)
  --limit N       the first N requests by time only (default all)
Prints the models, the items, the requests left out or cut, and the offered load on the sim's
default workers (a floor).
"""
import argparse
import csv
import datetime
import decimal
import sys

from trace_v2 import offered, signature, write


def azure_ns(s):
    """Nanoseconds of an Azure TIMESTAMP ("YYYY-MM-DD HH:MM:SS[.fffffff]"), exactly."""
    s = s.strip()
    if s.endswith("Z"):  # UTC said outright
        s = s[:-1]
    head, _, frac = s.partition(".")
    whole = datetime.datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
    whole = whole.replace(tzinfo=datetime.timezone.utc)
    if frac and not frac.isdigit():
        raise ValueError("bad fraction of a second %r" % frac)
    return int(whole.timestamp()) * 10**9 + int((frac + "0" * 9)[:9])


def seconds_ns(s):
    """Nanoseconds of a time in seconds ("12", "12.5"), exactly."""
    return int(decimal.Decimal(s.strip()) * 10**9)


LAYOUTS = {
    # name: (time column, its parser into ns, tokens column, model column or None)
    "azure": ("TIMESTAMP", azure_ns, "ContextTokens", None),
    "burstgpt": ("Timestamp", seconds_ns, "Request tokens", "Model"),
}


def layout_of(header):
    for name, (t, _, tok, model) in LAYOUTS.items():
        if t in header and tok in header and (model is None or model in header):
            return name
    raise SystemExit("not a known request log: header %s (want Azure's TIMESTAMP,ContextTokens,"
                     "... or BurstGPT's Timestamp,Model,Request tokens,...)" % ",".join(header))


def convert(rows, time_scale, max_tokens, limit):
    """Items (t_ns, model, shape, signature, tokens, 0) in arrival order, the model names, and
    the counts of requests left out (no tokens) and cut (over max_tokens)."""
    header = next(rows, None)
    if header is None:
        raise SystemExit("empty file")
    header = [h.strip() for h in header]
    name = layout_of(header)
    t_col, t_parse, tok_col, model_col = LAYOUTS[name]
    ti, ki = header.index(t_col), header.index(tok_col)
    mi = header.index(model_col) if model_col else None
    reqs, empty = [], 0
    for n, row in enumerate(rows, 2):
        if not any(c.strip() for c in row):
            continue
        try:
            t, tokens = t_parse(row[ti]), int(float(row[ki]))
            model = row[mi].strip() if mi is not None else "model"
        except (ValueError, IndexError, OverflowError, decimal.InvalidOperation) as e:
            raise SystemExit("line %d: not a %s request (%s): %s" % (n, name, e, ",".join(row)[:80]))
        if tokens <= 0:
            empty += 1
            continue
        reqs.append((t, n, model, tokens))
    reqs.sort()
    if limit:
        reqs = reqs[:limit]
    models, items, cut = {}, [], 0
    t0 = reqs[0][0] if reqs else 0
    for t, _, model, tokens in reqs:
        if model not in models:
            models[model] = len(models)
        m = models[model]
        if tokens > max_tokens:
            tokens, cut = max_tokens, cut + 1
        items.append((int(round((t - t0) * time_scale)), m, m, signature((name, model)),
                      tokens, 0))
    return name, items, models, empty, cut


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=32768)
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    if a.time_scale <= 0 or a.max_tokens < 1 or a.limit < 0:
        ap.error("--time-scale must be positive, --max-tokens at least 1, --limit at least 0")
    with open(a.input, newline="", encoding="utf-8-sig") as f:
        name, items, models, empty, cut = convert(csv.reader(f), a.time_scale, a.max_tokens,
                                                  a.limit)
    if not items:
        raise SystemExit("%s: no requests with tokens" % a.input)
    dur = write(a.output, items, name, len(models), 1,
                "from %s, %s layout, models %s, --time-scale %g --max-tokens %d"
                % (a.input, name, "/".join(models), a.time_scale, a.max_tokens))
    print("%s: %d items of %d model(s) (%s), %.1f s; %d requests without tokens left out, %d cut "
          "to %d tokens; offered load %.0f%% of 2 workers per model (a floor)"
          % (a.output, len(items), len(models), ", ".join(models), dur, empty, cut, a.max_tokens,
             100 * offered(items, len(models))))


if __name__ == "__main__":
    sys.exit(main())

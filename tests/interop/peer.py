"""peer.py - the interoperability matrix's Python peer (README.md beside it says what every peer
does; the C, Node and Go peers do the same)."""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
import lanesched  # noqa: E402

SHAPES = {"A": "interop system prompt A", "B": "interop system prompt B"}


def produce(a, client):
    out = {}
    for model in a.models.split(","):
        items, tokens = [], 0
        for i in range(a.count):
            letter = "AB"[i % 2]
            t = 1 + (i * 37 + a.seed) % 300
            item_id = f"{model}-{i}"
            items.append(lanesched.Item(id=item_id, tokens=t, components=[SHAPES[letter]],
                                        payload=f"{model}|{item_id}|{t}|{letter}", reply_to=f"interop.{model}.{item_id}",
                                        prefix_tokens=4, max_wait_ms=500))
            tokens += t
        r = client.submit(model, items)
        out[model] = {"items": r.accepted, "tokens": tokens, "rejected": r.rejected}
    return out


def consume(a, client):
    signs = {lanesched.shape_sign([s]): k for k, s in SHAPES.items()}
    models = a.models.split(",")
    seen = {m: {} for m in models}
    bad = {m: 0 for m in models}
    consumers = {m: client.consumer(m, max_batch_size=8, max_batch_tokens=4096, name=f"py-{m}", on_warning=lambda e: None) for m in models}
    end = time.monotonic() + a.timeout_s
    while time.monotonic() < end and any(len(seen[m]) < a.count for m in models):
        for m, k in consumers.items():
            if len(seen[m]) >= a.count:
                continue
            b = k.next(0.05)
            if b is None:
                continue
            letter = signs.get(b.signature)
            for it in b.items:
                iid = it.id.decode()
                fields = it.payload.decode().split("|")
                ok = (b.model == m and letter is not None and fields == [m, iid, str(it.tokens), letter]
                      and it.reply_to == f"interop.{m}.{iid}" and it.prefix_tokens == 4)
                bad[m] += 0 if ok else 1
                seen[m][iid] = it.tokens
            if b.ack().code:
                bad[m] += 1
    for k in consumers.values():
        k.close()
    return {m: {"items": len(seen[m]), "tokens": sum(seen[m].values()), "bad": bad[m]} for m in models}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["produce", "consume"])
    p.add_argument("--server", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--count", type=int, default=25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=60)
    a = p.parse_args()
    with lanesched.connect(a.server) as client:
        out = produce(a, client) if a.role == "produce" else consume(a, client)
    print(json.dumps({"models": out}))


if __name__ == "__main__":
    main()

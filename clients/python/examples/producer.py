"""A lanesched producer in Python: submits --count prompts (subjects.md's engine adapter payload:
JSON prompt and parameters) with one shape, then waits for each result on its reply_to.

    python3 examples/producer.py --server nats://127.0.0.1:4222 --model llama --count 8 --wait 30
"""

import argparse
import json
import time

import lanesched

p = argparse.ArgumentParser()
p.add_argument("--server", default=None, help="NATS URL (default env LANESCHED_SERVER or nats://127.0.0.1:4222)")
p.add_argument("--model", default="llama")
p.add_argument("--count", type=int, default=8)
p.add_argument("--wait", type=float, default=0, help="seconds to wait for the results (0: do not wait)")
a = p.parse_args()

system = "You are a helpful assistant."  # the cacheable prefix: the shape
with lanesched.connect(a.server) as client:
    inbox = client.new_inbox()
    results = client.subscribe(inbox + ".>")
    run = time.time_ns()
    items = [
        lanesched.Item(id=f"py-{run}-{i}", tokens=60 + 10 * i, components=[system],
                       payload=json.dumps({"prompt": f"{system}\nQuestion {i}: what is {i} + {i}?", "max_tokens": 16}),
                       reply_to=f"{inbox}.{i}")
        for i in range(a.count)
    ]
    r = client.submit(a.model, items)  # retries with the same ids until the daemon answers
    for res in r:
        print(res.id, res.status, res.reason)
    print(f"{r.accepted} accepted, {r.duplicate} duplicate, {r.rejected} rejected")
    got = 0
    while a.wait and got < r.accepted:
        m = results.next(a.wait)
        if m is None:
            raise SystemExit(f"{got} of {r.accepted} results came within {a.wait} s")
        print("result", m.subject, m.data.decode())
        got += 1

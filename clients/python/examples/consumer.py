"""A lanesched worker in Python: registers for --model with its packing contract and its cost,
takes batches, answers each item on its reply_to (here with a made-up completion; the engine
adapter lanesched-worker sends the batch to a real engine instead) and acks the batch.

    python3 examples/consumer.py --server nats://127.0.0.1:4222 --model llama --idle 10
"""

import argparse
import json
import time

import lanesched

p = argparse.ArgumentParser()
p.add_argument("--server", default=None, help="NATS URL (default env LANESCHED_SERVER or nats://127.0.0.1:4222)")
p.add_argument("--model", default="llama")
p.add_argument("--idle", type=float, default=10, help="exit after this many seconds without a batch")
a = p.parse_args()

with lanesched.connect(a.server) as client:
    worker = client.consumer(a.model, max_batch_size=8, max_batch_tokens=4096, name="py-example",
                             batch_fixed_us=20000, token_ns=50, cache_shapes=2)
    print("registered", worker.id)
    last = time.monotonic()
    while time.monotonic() - last < a.idle:
        batch = worker.next(timeout=1.0)
        if batch is None:
            continue
        last = time.monotonic()
        print(f"batch {batch.batch_id}: {len(batch)} items, shape {lanesched.shape_format(batch.signature)}, pad_to {batch.pad_to}")
        for item in batch:
            if item.reply_to:
                prompt = json.loads(item.payload).get("prompt", "")
                client.publish(item.reply_to, json.dumps({"id": item.id.decode(), "text": f"({len(prompt)} chars seen)"}))
        batch.ack()
    worker.close()  # Bye: anything unfinished goes back to the queue at once

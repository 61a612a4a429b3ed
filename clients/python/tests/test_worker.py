"""lanesched-worker end to end: a stand-in OpenAI-compatible engine (http.server) that records
every request, the real daemon, a producer waiting for results on its reply_to subjects."""

import json
import os
import subprocess
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import lanesched
from harness import HERE, Env
from lanesched import worker

SHAPES = ["You are a helpful assistant.", "Answer in French."]


class StandInEngine:
    """POST /v1/completions: one choice per prompt, text "<model>: <prompt> -> done"; records
    (model, prompts, params) of every request; fail_next makes the next requests answer 500; a
    request holding a prompt with "poison" in it is answered 400."""

    def __init__(self):
        self.requests = []
        self.fail_next = 0
        self.delay = 0.0
        eng = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/completions":
                    self.send_error(404)
                    return
                eng.requests.append(body)
                if eng.fail_next > 0:
                    eng.fail_next -= 1
                    self.send_error(500, "engine overloaded")
                    return
                if body["model"] == "no-such-model":
                    self.send_error(404, "model not found")
                    return
                if any("poison" in p for p in body["prompt"]):
                    self.send_error(400, "prompt rejected")
                    return
                time.sleep(eng.delay)
                choices = [{"index": i, "text": f"{body['model']}: {p} -> done", "finish_reason": "length"}
                           for i, p in enumerate(body["prompt"])]
                out = json.dumps({"object": "text_completion", "choices": list(reversed(choices))}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class WorkerEndToEnd(unittest.TestCase):
    def setUp(self):
        self.env = Env(["--ack-wait-ms", "600"])
        self.engine = StandInEngine()
        self.client = self.env.client()
        self.inbox = self.client.new_inbox()
        self.results = self.client.subscribe(self.inbox + ".>")

    def tearDown(self):
        self.results.close()
        self.client.close()
        self.engine.close()
        self.env.stop()

    def submit(self, n, payload=lambda i: {"prompt": f"question {i}", "max_tokens": 16}, shape=lambda i: SHAPES[i % 2]):
        items = [lanesched.Item(id=f"q{i}", tokens=20 + i, components=[shape(i)], payload=json.dumps(payload(i)) if not isinstance(payload(i), bytes) else payload(i),
                                reply_to=f"{self.inbox}.q{i}") for i in range(n)]
        self.assertEqual(self.client.submit("llama-8b", items).accepted, n)

    def collect(self, n, timeout=20):
        got = {}
        end = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < end:
            m = self.results.next(0.5)
            if m is not None:
                doc = json.loads(m.data)
                got.setdefault(doc["id"], doc)
        return got

    def run_worker(self, **kw):
        consumer = self.client.consumer("llama-8b", max_batch_size=4, max_batch_tokens=4096, batch_fixed_us=20000,
                                        token_ns=50, cache_shapes=2, name="engine-0")
        w = worker.Worker(self.client, consumer, worker.Engine(self.engine.url, kw.get("engine_model", "meta-llama/Llama-3.1-8B")), kw.get("defaults"),
                          max_input_tokens=kw.get("max_input", 0), engine_retry=kw.get("retry", 60.0))
        t = threading.Thread(target=w.run, kwargs={"until_idle": kw.get("idle", 3.0)})
        t.start()
        return w, t

    def test_batches_become_requests(self):
        self.submit(12)
        w, t = self.run_worker()
        got = self.collect(12)
        t.join()
        self.assertEqual(sorted(got), sorted(f"q{i}" for i in range(12)))
        for i in range(12):
            self.assertEqual(got[f"q{i}"]["text"], f"meta-llama/Llama-3.1-8B: question {i} -> done")
            self.assertEqual(got[f"q{i}"]["finish_reason"], "length")
        # one request per batch, each batch of one shape, within the contract, prompts in order
        self.assertEqual(len(self.engine.requests), w.stats.batches)
        for req in self.engine.requests:
            self.assertLessEqual(len(req["prompt"]), 4)
            self.assertEqual({int(p.split()[1]) % 2 for p in req["prompt"]}.__len__(), 1)
            self.assertEqual(req["max_tokens"], 16)
            self.assertEqual(req["model"], "meta-llama/Llama-3.1-8B")
        self.assertEqual(sum(len(r["prompt"]) for r in self.engine.requests), 12)
        self.assertEqual((w.stats.acked, w.stats.nacked), (12, 0))
        st = self.env.stats()["counters"]
        self.assertEqual(st["tokens_received"], st["tokens_completed"])
        c = [x for x in self.env.stats()["consumers"] if x["name"] == "engine-0"][0]
        self.assertEqual((c["cost_fixed_us"], c["cost_token_ns"], c["cache_shapes"]), (20000, 50, 2))

    def test_engine_outage_is_retried_in_progress(self):
        # two 500s: retried with the batch kept in progress, no nak, no delivery spent
        self.submit(3, shape=lambda i: SHAPES[0])
        self.engine.fail_next = 2
        w, t = self.run_worker()
        got = self.collect(3)
        t.join()
        self.assertEqual(sorted(got), ["q0", "q1", "q2"])
        self.assertEqual((w.stats.engine_failures, w.stats.engine_retries), (2, 2))
        self.assertEqual((w.stats.acked, w.stats.nacked), (3, 0))
        st = self.env.stats()["counters"]
        self.assertEqual(st["items_returned"], 0)
        self.assertEqual(st["tokens_received"], st["tokens_completed"])

    def test_engine_outage_past_the_retry_naks_then_redelivers(self):
        # --engine-retry 0.5 s: the second failure would retry past it, so the items are nak'd
        self.submit(3, shape=lambda i: SHAPES[0])
        self.engine.fail_next = 2
        w, t = self.run_worker(retry=0.5)
        got = self.collect(3)
        t.join()
        self.assertEqual(sorted(got), ["q0", "q1", "q2"])
        self.assertEqual(w.stats.engine_failures, 2)
        self.assertEqual((w.stats.nacked, w.stats.acked), (3, 3))
        st = self.env.stats()["counters"]
        self.assertEqual(st["items_returned"], 3)
        self.assertEqual(st["tokens_received"], st["tokens_completed"])

    def test_a_prompt_the_engine_refuses_fails_alone(self):
        # a 400 for the batch's request: sent again one prompt at a time; only the bad one fails,
        # answered with the engine's reason and acked (it can never succeed)
        self.submit(3, payload=lambda i: {"prompt": "poison" if i == 1 else f"question {i}"}, shape=lambda i: SHAPES[0])
        w, t = self.run_worker()
        got = self.collect(3)
        t.join()
        self.assertTrue(got["q1"]["error"].startswith("engine_refused:"), got["q1"])
        self.assertIn("prompt rejected", got["q1"]["error"])
        self.assertEqual(got["q0"]["text"], "meta-llama/Llama-3.1-8B: question 0 -> done")
        self.assertEqual(got["q2"]["text"], "meta-llama/Llama-3.1-8B: question 2 -> done")
        self.assertEqual((w.stats.acked, w.stats.nacked, w.stats.engine_refused), (3, 0, 1))
        st = self.env.stats()["counters"]
        self.assertEqual((st["items_returned"], st["tokens_received"]), (0, st["tokens_completed"]))

    def test_a_misconfigured_engine_naks_instead_of_answering(self):
        # a 404 (a model name the engine does not serve) is the worker's configuration, not the
        # items': nak'd for redelivery, nothing answered as if the items were bad
        self.submit(3, shape=lambda i: SHAPES[0])
        w, t = self.run_worker(engine_model="no-such-model", idle=1.0)
        t.join()
        self.assertEqual(self.collect(3, timeout=1), {})
        self.assertEqual((w.stats.acked, w.stats.engine_refused), (0, 0))
        self.assertGreaterEqual(w.stats.nacked, 3)

    def test_items_over_max_input_tokens_are_answered_by_the_worker(self):
        # tokens 20..27 against --max-input-tokens 24: the last three never reach the engine
        self.submit(8, shape=lambda i: SHAPES[0])
        w, t = self.run_worker(max_input=24)
        got = self.collect(8)
        t.join()
        for i in range(8):
            if 20 + i > 24:
                self.assertTrue(got[f"q{i}"]["error"].startswith("input_too_long:"), got[f"q{i}"])
            else:
                self.assertIn("text", got[f"q{i}"])
        self.assertEqual(sum(len(r["prompt"]) for r in self.engine.requests), 5)
        self.assertEqual(w.stats.acked, 8)

    def test_the_worker_survives_a_daemon_restart(self):
        # the daemon stops while the engine works a batch: the settle finds no lanesched, the
        # worker keeps running, registers again, and every item is answered after the restart
        self.submit(4, shape=lambda i: SHAPES[0])
        self.engine.delay = 1.0
        w, t = self.run_worker(idle=8.0)
        end = time.monotonic() + 10
        while not self.engine.requests and time.monotonic() < end:
            time.sleep(0.02)
        self.assertTrue(self.engine.requests, "no engine request")
        self.env.daemon_stop()
        time.sleep(1.5)
        self.engine.delay = 0.0
        self.env.daemon_start()
        got = self.collect(4, timeout=30)
        w.stop.set()
        t.join()
        self.assertEqual(sorted(got), ["q0", "q1", "q2", "q3"])
        self.assertTrue(t.is_alive() is False and w.stats.settle_failures >= 1, w.stats)

    def test_bad_payload_and_mixed_parameters(self):
        def payload(i):
            if i == 0:
                return b"not json"
            return {"prompt": f"question {i}", "max_tokens": 8 if i < 3 else 32}
        self.submit(5, payload=payload, shape=lambda i: SHAPES[0])
        w, t = self.run_worker(defaults={"temperature": 0.5})
        got = self.collect(5)
        t.join()
        self.assertTrue(got["q0"]["error"].startswith("bad_payload:"), got["q0"])
        self.assertEqual(w.stats.bad_payloads, 1)
        sizes = sorted((r["max_tokens"], len(r["prompt"])) for r in self.engine.requests)
        self.assertEqual(sum(n for _, n in sizes), 4)
        self.assertEqual({m for m, _ in sizes}, {8, 32})
        self.assertTrue(all(r["temperature"] == 0.5 for r in self.engine.requests))
        st = self.env.stats()["counters"]
        self.assertEqual(st["tokens_received"], st["tokens_completed"])

    def test_slow_engine_kept_in_progress(self):
        # ack_wait_ms is 600 here: a 1.5 s request outlives it and must not be redelivered
        self.submit(2, shape=lambda i: SHAPES[0])
        self.engine.delay = 1.5
        w, t = self.run_worker(idle=2.0)
        got = self.collect(2)
        t.join()
        self.assertEqual(sorted(got), ["q0", "q1"])
        st = self.env.stats()["counters"]
        self.assertEqual((st["items_returned"], st["batches_expired_ack_deadline"]), (0, 0))
        self.assertEqual(len(self.engine.requests), 1)

    def test_command_line(self):
        self.submit(4, payload=lambda i: {"prompt": f"question {i}"}, shape=lambda i: SHAPES[0])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
        out = subprocess.run([sys.executable, "-m", "lanesched.worker", "--server", self.env.url, "--model", "llama-8b",
                              "--engine-url", self.engine.url, "--max-batch-size", "8", "--max-batch-tokens", "4096",
                              "--max-tokens", "12", "--until-idle", "2", "--json"],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertEqual((summary["items"], summary["acked"]), (4, 4))
        self.assertEqual(len(self.collect(4)), 4)
        self.assertEqual(self.engine.requests[0]["max_tokens"], 12)
        bad = subprocess.run([sys.executable, "-m", "lanesched.worker", "--server", self.env.url, "--model", "bad model",
                              "--max-batch-size", "8", "--max-batch-tokens", "4096"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("bad_model_name", bad.stderr)


if __name__ == "__main__":
    unittest.main()

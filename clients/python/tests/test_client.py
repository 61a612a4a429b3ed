"""The Python client against a real nats-server and the real daemon: submit verdicts and bad
input, the consumer's settle calls, declared cost and cache, results on reply_to, a custom inbox
prefix, the async iterator, registering again after a daemon restart or crash and after being
declared dead, and the producer's retries with the same ids."""

import asyncio
import json
import signal
import threading
import time
import unittest

import lanesched
from harness import Env, until

SYSTEM = "You are a helpful assistant."


def items(n, prefix="j", tokens=lambda i: 10 + i, **kw):
    return [lanesched.Item(id=f"{prefix}{i}", tokens=tokens(i), components=[SYSTEM], payload=f"p{i}", **kw) for i in range(n)]


class Base(unittest.TestCase):
    flags = []

    def setUp(self):
        self.env = Env(self.flags)
        self.client = self.env.client()

    def tearDown(self):
        self.client.close()
        self.env.stop()

    def take(self, consumer, n, timeout=10.0):
        got = []
        end = time.monotonic() + timeout
        while sum(len(b) for b in got) < n:
            b = consumer.next(max(0.1, end - time.monotonic()))
            self.assertIsNotNone(b, f"only {sum(len(b) for b in got)} of {n} items came")
            got.append(b)
        return got


class Producer(Base):
    def test_verdicts_and_bad_input(self):
        r = self.client.submit("llama", items(3) + [
            {"id": "j0", "tokens": 5},  # the same id again: duplicate
            {"id": "zero", "tokens": 0},
            {"id": "", "tokens": 5},
            {"id": "x" * 65, "tokens": 5},
            {"id": "mismatch", "tokens": 5, "signature": 1, "component_hashes": [lanesched.shape_hash(SYSTEM)]},
            {"id": "fields", "tokens": 7, "prefix_tokens": 3, "max_wait_ms": 250, "payload": bytes(range(256))},
        ])
        self.assertEqual([(x.status, x.reason) for x in r], [("accepted", "ok")] * 3 + [
            ("duplicate", "duplicate"), ("rejected", "zero_tokens"), ("rejected", "bad_id"),
            ("rejected", "id_too_long"), ("rejected", "signature_mismatch"), ("accepted", "ok")])
        self.assertEqual((r.accepted, r.duplicate, r.rejected), (4, 1, 4))
        again = self.client.submit("llama", items(3))
        self.assertEqual([x.reason for x in again], ["duplicate"] * 3)

    def test_bad_model_fails_at_once(self):
        for model, word in (("", "bad_model"), ("bad model", "bad_model_name"), ("a.*", "bad_model_name")):
            t0 = time.monotonic()
            with self.assertRaises(lanesched.LanesError) as cm:
                self.client.submit(model, items(1))
            self.assertEqual(cm.exception.code, word)
            with self.assertRaises(lanesched.LanesError) as cm:
                self.client.consumer(model, max_batch_size=1, max_batch_tokens=10)
            self.assertEqual(cm.exception.code, word)
            self.assertLess(time.monotonic() - t0, 1.0)
        with self.assertRaises(lanesched.LanesError) as cm:
            self.client.consumer("llama", max_batch_size=1, max_batch_tokens=0)
        self.assertEqual(cm.exception.code, "zero_batch_tokens")
        with self.assertRaises(TypeError):
            self.client.consumer("llama", max_batch_size=1, max_batch_tokens=10, maxBatchSize=3)

    def test_daemon_refusal_carries_its_word(self):
        with self.assertRaises(lanesched.LanesError) as cm:
            self.client.consumer("llama", max_batch_size=1, max_batch_tokens=10, name="n" * 300)
        self.assertEqual(cm.exception.code, "name_too_long")

    def test_chunks_to_max_payload(self):
        env2 = Env(nats_config="max_payload: 65536")
        try:
            c = env2.client()
            big = [lanesched.Item(id=f"b{i}", tokens=5, payload=b"x" * 3000) for i in range(60)]
            big.append(lanesched.Item(id="huge", tokens=5, payload=b"x" * 70000))
            r = c.submit("llama", big)
            self.assertEqual(r.accepted, 60)
            self.assertEqual((r[60].status, r[60].reason), ("rejected", "payload_too_large"))
            self.assertGreater(r.attempts, 2)  # several Submits
            c.close()
        finally:
            env2.stop()


class Consuming(Base):
    def test_settle_calls(self):
        self.client.submit("llama", items(4))
        k = self.client.consumer("llama", max_batch_size=8, max_batch_tokens=4096, name="gpu-0")
        (b,) = self.take(k, 4)
        self.assertEqual([i.id for i in b.items], [b"j0", b"j1", b"j2", b"j3"])
        self.assertEqual([i.payload for i in b.items], [b"p0", b"p1", b"p2", b"p3"])
        self.assertEqual(b.pad_to, 16)
        self.assertEqual(b.signature, lanesched.shape_sign([SYSTEM]))
        self.assertEqual(b.in_progress().code, "")
        self.assertEqual(b.settle(ack=[0], nak=[9]).code, "unknown_position")
        r = b.settle(ack=[0, 1], nak=[3])
        self.assertEqual((r.acked, r.returned, r.code), (2, 1, ""))
        (again,) = self.take(k, 1)
        self.assertEqual([(i.id, i.deliveries) for i in again.items], [(b"j3", 2)])
        self.assertEqual(again.nak().returned, 1)
        (third,) = self.take(k, 1)
        self.assertEqual(third.items[0].deliveries, 3)
        self.assertEqual(third.ack().acked, 1)
        self.assertEqual(third.ack().code, "unknown_batch")
        self.assertEqual(b.ack().acked, 1)  # position 2
        self.assertTrue(b.done)
        st = self.env.stats()["counters"]
        self.assertEqual(st["tokens_received"], st["tokens_completed"])
        self.assertEqual(k.close(), "")

    def test_declared_cost_and_cache(self):
        k = self.client.consumer("llama", max_batch_size=4, max_batch_tokens=512, max_input_tokens=256,
                                 batch_fixed_us=2500, token_ns=40, cache_shapes=3)
        c = [x for x in self.env.stats()["consumers"] if x["id"] == k.id][0]
        self.assertEqual((c["cost_estimated"], c["cost_fixed_us"], c["cost_token_ns"], c["cache_shapes"]), (False, 2500, 40, 3))
        self.assertEqual((c["max_batch_size"], c["max_batch_tokens"], c["max_input_tokens"]), (4, 512, 256))
        # the subjects carry the registration's secret, never the public id (docs/security.md)
        self.assertTrue(k.registration.pull_subject.startswith("lanes.pull."))
        self.assertEqual(len(k.registration.pull_subject), len("lanes.pull.") + 32)
        self.assertNotIn(k.id, k.registration.pull_subject)

    def test_results_on_reply_to_with_inbox_prefix(self):
        client = self.env.client(inbox_prefix="_INBOX_alice")
        inbox = client.new_inbox()
        self.assertTrue(inbox.startswith("_INBOX_alice."), inbox)
        results = client.subscribe(inbox + ".*")
        client.submit("llama", [lanesched.Item(id=f"r{i}", tokens=5, payload=f"q{i}", reply_to=f"{inbox}.{i}") for i in range(3)])
        k = client.consumer("llama", max_batch_size=8, max_batch_tokens=4096)
        for b in self.take(k, 3):
            for it in b.items:
                client.publish(it.reply_to, b"answer to " + it.payload)
            b.ack()
        got = sorted((m.subject, m.data) for m in (results.next(5) for _ in range(3)))
        self.assertEqual(got, [(f"{inbox}.{i}", f"answer to q{i}".encode()) for i in range(3)])
        results.close()
        client.close()

    def test_nats_flusher(self):
        # the writes left to nats.c's flusher thread still all leave: a submit and a batch's ack
        client = self.env.client(nats_flusher=True)
        r = client.submit("llama", [lanesched.Item(id=f"f{i}", tokens=5, payload="q") for i in range(3)])
        self.assertEqual(r.accepted, 3)
        k = client.consumer("llama", max_batch_size=8, max_batch_tokens=4096)
        got = []
        for b in self.take(k, 3):
            got += [it.id for it in b.items]
            self.assertEqual(b.ack().code, "")
        self.assertEqual(sorted(got), [b"f0", b"f1", b"f2"])
        self.assertEqual(k.close(), "")
        client.close()
        with self.assertRaises(TypeError):
            self.env.client(nats_flush=True)

    def test_reply_to_that_is_no_subject(self):
        # a reply_to with a space, CR or LF would make a worker's connection send the rest as
        # protocol commands: the daemon refuses the item, and the client publishes nothing there
        bad = "results.x 0\r\n\r\nPUB lanes.register _INBOX.x 2\r\nhi"
        r = self.client.submit("llama", [lanesched.Item(id="bad-reply", tokens=5, payload="q", reply_to=bad),
                                         lanesched.Item(id="tab-reply", tokens=5, payload="q", reply_to="a\tb"),
                                         lanesched.Item(id="fine-reply", tokens=5, payload="q", reply_to="results.x")])
        self.assertEqual([(x.status, x.reason) for x in r], [("rejected", "bad_reply_to")] * 2 + [("accepted", "ok")])
        for subject in (bad, "a b", ""):
            with self.assertRaises(lanesched.LanesError) as cm:
                self.client.publish(subject, b"x")
            self.assertEqual(cm.exception.code, "bad_argument")
        k = self.client.consumer("llama", max_batch_size=8, max_batch_tokens=4096)
        self.assertEqual([it.id for b in self.take(k, 1) for it in b.items], [b"fine-reply"])

    def test_async_iterator(self):
        self.client.submit("llama", items(5))
        k = self.client.consumer("llama", max_batch_size=2, max_batch_tokens=4096)

        async def run():
            n = 0
            async for b in k:
                self.assertEqual((await b.ack_async()).code, "")
                n += len(b)
                if n == 5:
                    return n

        self.assertEqual(asyncio.run(asyncio.wait_for(run(), 20)), 5)

    def test_close_from_several_threads(self):
        # the client frees the connection right after closing its consumers: a close still
        # running on another thread must be finished by then (a use after free under ASan)
        for _ in range(3):
            k = self.client.consumer("llama", max_batch_size=2, max_batch_tokens=4096)
            sub = self.client.subscribe("results.>")
            threads = [threading.Thread(target=k.close) for _ in range(3)]
            for t in threads:
                t.start()
            self.client.close()
            for t in threads:
                t.join()
            self.assertIsNone(k.next(0.1))
            with self.assertRaises(lanesched.LanesError):
                sub.next(0.1)
            self.client = self.env.client()

    def test_iterator_stops_at_close(self):
        k = self.client.consumer("llama", max_batch_size=2, max_batch_tokens=4096)
        threading.Timer(0.5, k.close).start()
        t0 = time.monotonic()
        self.assertEqual(list(k), [])
        self.assertLess(time.monotonic() - t0, 5)


class Restart(Base):
    flags = ["--dead-after-ms", "1500", "--heartbeat-ms", "300"]

    def restart_case(self, sig):
        warnings = []
        k = self.client.consumer("llama", max_batch_size=8, max_batch_tokens=4096, pull_expires_ms=1000,
                                 on_warning=warnings.append)
        first = k.id
        self.env.daemon_stop(sig)
        self.assertIsNone(k.next(1.5))  # pulls reach nobody meanwhile: no-responders, lost pulls
        self.env.daemon_start()
        self.client.submit("llama", items(3, prefix="after"))
        got = self.take(k, 3, timeout=20)
        self.assertEqual(sorted(i.id for b in got for i in b.items), [b"after0", b"after1", b"after2"])
        self.assertNotEqual(k.id, first)
        self.assertGreaterEqual(k.registrations, 2)
        self.assertTrue(any(w.code in ("no_responders", "timeout", "unknown_consumer") for w in warnings), warnings)
        for b in got:
            self.assertEqual(b.ack().code, "")

    def test_daemon_restart(self):
        self.restart_case(signal.SIGTERM)

    def test_daemon_crash(self):
        self.restart_case(signal.SIGKILL)

    def test_declared_dead_registers_again(self):
        k = self.client.consumer("llama", max_batch_size=8, max_batch_tokens=4096, heartbeat_ms=0,
                                 pull_expires_ms=3000, on_warning=lambda e: None)
        first = k.id
        self.client.submit("llama", items(2))
        (b,) = self.take(k, 2)
        time.sleep(2.0)  # no heartbeats, no pulls within dead_after_ms: declared dead
        self.assertEqual(b.ack().code, "unknown_consumer")
        self.client.submit("llama", items(2, prefix="later"))
        got = self.take(k, 4, timeout=20)  # the returned two, and the new two
        self.assertNotEqual(k.id, first)
        self.assertEqual(sorted(i.id for g in got for i in g.items), [b"j0", b"j1", b"later0", b"later1"])

    def test_producer_retries_same_ids(self):
        self.client.submit("llama", items(2))
        self.env.daemon_stop()
        with self.assertRaises(lanesched.LanesError) as cm:
            self.client.producer(retry_for=0.3).submit("llama", items(1, prefix="x"))
        self.assertEqual(cm.exception.code, "no_responders")
        threading.Timer(1.0, self.env.daemon_start).start()
        r = self.client.producer(timeout=1.0, retry_for=30).submit("llama", items(4))
        self.assertEqual([x.reason for x in r], ["duplicate", "duplicate", "ok", "ok"])


class Misconfigured(Base):
    # Every registration forgotten at once: a worker that sends no heartbeats to a daemon whose
    # --dead-after-ms is shorter than its pulls.
    flags = ["--dead-after-ms", "100", "--heartbeat-ms", "50"]

    def test_registrations_back_off(self):
        k = self.client.consumer("llama", max_batch_size=8, max_batch_tokens=4096, heartbeat_ms=0,
                                 pull_expires_ms=200, on_warning=lambda e: None)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4:
            k.next(0.25)
        # Waits of 0, 0.2, 0.4, 0.8 and 1.6 s fit in 4 s beside the pulls: about 6 registrations.
        self.assertGreaterEqual(k.registrations, 3)
        self.assertLessEqual(k.registrations, 10)
        k.close()


if __name__ == "__main__":
    unittest.main()

"""Unit tests of the Python client that need no server: the shape vectors of subjects.md, the
model rule, option and item checks, the ABI check, error words and the worker's payload
convention."""

import ctypes
import json
import unittest

import lanesched
from lanesched import _native, errors, worker


class ShapeVectors(unittest.TestCase):
    # subjects.md, "Shape signatures and test vectors"
    def test_vectors(self):
        self.assertEqual(lanesched.shape_sign([]), 0xEF46DB3751D8E999)
        self.assertEqual(lanesched.shape_hash("You are a helpful assistant."), 0xE4A58AD40A48973B)
        self.assertEqual(lanesched.shape_sign(["You are a helpful assistant."]), 0x91F47F2F45B64EFD)
        three = ["You are a helpful assistant.", "Answer in French.", "Tools: search, calculator."]
        self.assertEqual([lanesched.shape_hash(c) for c in three], [0xE4A58AD40A48973B, 0x6FD2A283F58D194E, 0x425AFD5D136C7E5E])
        self.assertEqual(lanesched.shape_sign(three), 0xA340B41B91CCA53D)
        self.assertEqual(lanesched.shape_sign(list(reversed(three))), 0xAF6225C57A35EC89)
        self.assertEqual(lanesched.shape_sign([c.encode() for c in three]), 0xA340B41B91CCA53D)

    def test_format_parse(self):
        self.assertEqual(lanesched.shape_format(0x91F47F2F45B64EFD), "0x91f47f2f45b64efd")
        self.assertEqual(lanesched.shape_parse("0x91f47f2f45b64efd"), 0x91F47F2F45B64EFD)
        for bad in ("0x0", "", "0x", "12345678901234567", "xyz"):
            with self.assertRaises(ValueError):
                lanesched.shape_parse(bad)


class ModelRule(unittest.TestCase):
    # codec/validate.c: codec_model_check, with its words
    def test_words(self):
        for good in ("llama", "llama-3.1", "meta.llama-3.1-8b", "modèle"):
            lanesched.check_model(good)
        cases = {"": "bad_model", "bad model": "bad_model_name", "a*": "bad_model_name", "a.>": "bad_model_name",
                 ".a": "bad_model_name", "a.": "bad_model_name", "a..b": "bad_model_name", "a\tb": "bad_model_name",
                 "x" * 256: "model_too_long", "a\0b": "bad_model_name"}
        for model, word in cases.items():
            with self.assertRaises(lanesched.LanesError) as cm:
                lanesched.check_model(model)
            self.assertEqual(cm.exception.code, word, model)


class Checks(unittest.TestCase):
    def test_abi_sizes(self):
        for name, cls in _native.MIRRORED.items():
            self.assertEqual(_native.lib.lc_abi_size(name.encode()), ctypes.sizeof(cls), name)
        self.assertEqual(_native.lib.lc_abi_size(b"no_such_type"), 0)

    def test_codec_words(self):
        for w in ("malformed", "bad_model", "zero_tokens", "bad_model_name", "queue_full", "reply_too_large"):
            self.assertIn(w, _native.CODEC_WORDS)

    def test_error_words(self):
        self.assertEqual(errors.daemon_word("lanes.register: register refused: zero_batch_tokens: must be > 0"), "zero_batch_tokens")
        self.assertEqual(errors.daemon_word("lanes.ack.x: batch 7: unknown_position: a position is outside"), "unknown_position")
        self.assertEqual(errors.daemon_word("no word here"), "refused")
        self.assertEqual(lanesched.code_word("unknown_batch: not in flight"), "unknown_batch")
        self.assertEqual(lanesched.code_word(""), "")

    def test_unknown_options_refused(self):
        with self.assertRaises(TypeError):
            lanesched.connect("nats://127.0.0.1:1", prefixx="lanes")
        with self.assertRaises(TypeError):
            lanesched.producer.Producer(None, timeoutt=1)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            lanesched.producer._item({"id": "a", "tokens": 1, "replyTo": "x"})

    def test_item_ranges(self):
        m = b"llama"
        for field, v in (("tokens", -1), ("tokens", 1 << 32), ("prefix_tokens", 1 << 32), ("max_wait_ms", -5),
                         ("signature", 0), ("signature", 1 << 64)):
            it = lanesched.Item(id="a", tokens=1)
            setattr(it, field, v)
            with self.assertRaises(ValueError, msg=field):
                lanesched.producer._Encoded(m, it, 1)
        e = lanesched.producer._Encoded(m, lanesched.Item(id="a", tokens=5, prefix_tokens=3, max_wait_ms=250), 7)
        self.assertEqual((e.w.tokens, e.w.prefix_tokens, e.w.max_wait_ms, e.w.created_unix_ns), (5, 3, 250, 7))
        self.assertEqual(e.w.signature, lanesched.EMPTY_SIGNATURE)

    def test_connect_refused(self):
        with self.assertRaises(lanesched.LanesError) as cm:
            lanesched.connect("nats://127.0.0.1:1", connect_timeout=0.5)
        self.assertEqual(cm.exception.code, "connect")


class PayloadConvention(unittest.TestCase):
    # subjects.md, "Engine adapter payloads"
    def test_parse(self):
        p, params = worker.payload_parse(json.dumps({"prompt": "hi", "max_tokens": 8, "params": {"top_k": 5}}).encode())
        self.assertEqual((p, params), ("hi", {"top_k": 5, "max_tokens": 8}))
        for bad in (b"not json", b"[1]", b'{"prompt": 3}', b'{"prompt": "a", "params": 1}', b'{"prompt": "a", "n": 2}', b"\xff"):
            with self.assertRaises(worker.PayloadError):
                worker.payload_parse(bad)

    def test_ids(self):
        self.assertEqual(worker.item_id_fields(b"job-1"), {"id": "job-1"})
        self.assertEqual(worker.item_id_fields(b"\xff\x00"), {"id_base64": "/wA="})

    def test_engine_url(self):
        self.assertEqual(worker.Engine("http://h:8000", "m").url, "http://h:8000/v1/completions")
        self.assertEqual(worker.Engine("http://h:8000/v1", "m").url, "http://h:8000/v1/completions")
        self.assertEqual(worker.Engine("http://h/v1/completions", "m").url, "http://h/v1/completions")


if __name__ == "__main__":
    unittest.main()

"""A stand-in for an OpenAI-compatible completions server (what vLLM, SGLang, TGI and llama.cpp's
server answer at /v1/completions), to try lanesched-worker without a GPU: each prompt's text is
"<prompt's last line> -> done". Prints one line per request: how many prompts it batched.

    python3 examples/fake_engine.py --port 8000
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=8000)
a = p.parse_args()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        print(f"request: model {body.get('model')}, {len(prompts)} prompts, max_tokens {body.get('max_tokens')}", flush=True)
        out = json.dumps({"object": "text_completion", "model": body.get("model"), "choices": [
            {"index": i, "text": p.splitlines()[-1] + " -> done", "finish_reason": "stop"} for i, p in enumerate(prompts)]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


ThreadingHTTPServer(("127.0.0.1", a.port), Handler).serve_forever()

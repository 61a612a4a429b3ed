// load.test.mjs - the independent load client (load-client.mjs, written from subjects.md alone)
// against a fresh nats-server and lanesched with the disk store: two mixes of shapes and lengths
// unlike lanesched-bench's, each submitted with a window of Submits in flight and consumed with
// pulls kept open and an ack per batch. Fails on any item not accepted, lost, delivered twice,
// delivered with other tokens or payload or in a batch that breaks the consumer's contract, any
// ack not acknowledging its batch, and tokens received or completed not equal to those
// submitted. Run by CTest (node_load_client, label smoke):
//
//   LANESCHED_BIN=build/bin/lanesched node --test tests/node/load.test.mjs
//
// Needs tests/node/node_modules (npm ci --prefix tests/node; scripts/test.sh runs it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run } from "./load-client.mjs";
import { LANESCHED, startLanesched, startNats, stopAll } from "./harness.mjs";

let dir, url;

before(async () => {
  assert.ok(LANESCHED, "LANESCHED_BIN must name the lanesched binary");
  dir = mkdtempSync(join(tmpdir(), "lanes-node-load-"));
  ({ url } = await startNats());
  await startLanesched("lanesched", ["--server", url, "--data-dir", join(dir, "data")]);
});

after(async () => {
  await stopAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function verdict(res) {
  console.log(`load-client ${res.mix}: ${res.items} items, ${res.itemsPerSecond.toFixed(0)} items/s end to end ` +
    `(${res.seconds.toFixed(2)} s), retried ${res.retried}, tokens ${res.tokens} = received ` +
    `${res.tokensReceived} = completed ${res.tokensCompleted}`);
  assert.deepEqual(res.errors, []);
  assert.equal(res.accepted, res.items);
  assert.equal(res.consumed, res.items);
  assert.equal(res.duplicates, 0);
  assert.equal(res.broken, 0);
  assert.equal(res.acked, res.items);
  assert.equal(res.tokensReceived, res.tokens);
  assert.equal(res.tokensCompleted, res.tokens);
  assert.ok(res.ok);
}

test("zipf mix: 3 models x 100 shapes, bimodal lengths, payloads and Submits of every size", async () => {
  verdict(await run({ server: url, items: 8000, mix: "zipf", timeoutMs: 120000 }));
});

test("flat mix: 1 model x 600 equally popular shapes, uniform lengths to 4,096", async () => {
  verdict(await run({ server: url, items: 4000, mix: "flat", timeoutMs: 120000 }));
});

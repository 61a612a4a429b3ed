// discovery.test.mjs - lanesched seen by a real service client: nats.js's nc.services.client()
// (the NATS micro-service protocol, ADR-32) against a real nats-server and two lanesched
// instances that split models with --models. Run by CTest (node_service_discovery):
//
//   LANESCHED_BIN=build/bin/lanesched node --test tests/node/discovery.test.mjs
//
// Needs tests/node/node_modules (npm ci --prefix tests/node; scripts/test.sh runs it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LANESCHED, startLanesched, startNats, stopAll } from "./harness.mjs";

let nats;
try {
  nats = await import("nats");
} catch (e) {
  throw new Error(
    `the npm package "nats" is missing: run npm ci --prefix tests/node (${e.message})`,
  );
}

let dir, port, nc;

async function collect(iterPromise) {
  const out = [];
  for await (const r of await iterPromise) out.push(r);
  return out;
}

before(async () => {
  assert.ok(LANESCHED, "LANESCHED_BIN must name the lanesched binary");
  dir = mkdtempSync(join(tmpdir(), "lanes-node-discovery-"));
  let url;
  ({ port, url } = await startNats());
  for (const [name, models] of [["a", "llama"], ["b", "qwen"]])
    await startLanesched(name, ["--server", url, "--store", "memory", "--models", models]);
  nc = await nats.connect({ servers: `127.0.0.1:${port}` });
});

after(async () => {
  if (nc) await nc.close();
  await stopAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const version = () =>
  execFileSync(LANESCHED, ["--version"]).toString().trim().split(" ")[1];

test("every instance answers a ping, with its own id and the daemon's version", async () => {
  const pings = await collect(nc.services.client().ping());
  assert.equal(pings.length, 2, JSON.stringify(pings));
  for (const p of pings) {
    assert.equal(p.type, "io.nats.micro.v1.ping_response");
    assert.equal(p.name, "lanesched");
    assert.equal(p.version, version());
    assert.match(p.version, /^\d+\.\d+\.\d+/);
    assert.equal(p.metadata.protocol_version, "1");
    assert.match(p.id, /^[0-9A-Za-z]{22}$/);
  }
  assert.notEqual(pings[0].id, pings[1].id);
  // another service's name: nobody answers, which the client reports as "no responders"
  await assert.rejects(collect(nc.services.client().ping("other-service")), /503/);
});

test("the name and id filters address one instance", async () => {
  const client = nc.services.client();
  const all = await collect(client.ping("lanesched"));
  assert.equal(all.length, 2);
  const one = await collect(client.ping("lanesched", all[1].id));
  assert.equal(one.length, 1);
  assert.equal(one[0].id, all[1].id);
});

test("info lists the endpoints with their subjects", async () => {
  const infos = await collect(nc.services.client().info("lanesched"));
  assert.equal(infos.length, 2);
  const submits = infos.map((i) => i.endpoints.find((e) => e.name === "submit").subject).sort();
  assert.deepEqual(submits, ["lanes.submit.llama", "lanes.submit.qwen"]);
  for (const i of infos) {
    assert.equal(i.type, "io.nats.micro.v1.info_response");
    const subjects = Object.fromEntries(i.endpoints.map((e) => [e.name, e.subject]));
    const registers = i.endpoints.filter((e) => e.name === "register").map((e) => e.subject);
    assert.deepEqual(registers, ["lanes.register", "lanes.register.>"]);
    assert.equal(subjects.pull, "lanes.pull.*");
    assert.equal(subjects.ack, "lanes.ack.*");
    assert.equal(subjects.stats, "lanes.stats");
  }
});

test("stats count each endpoint's requests and errors", async () => {
  const client = nc.services.client();
  const infos = await collect(client.info("lanesched"));
  const llama = infos.find((i) => i.endpoints.some((e) => e.subject === "lanes.submit.llama"));
  // one Submit that is not protobuf (refused whole: malformed), then a stats request
  await nc.request("lanes.submit.llama", new Uint8Array([0xff, 0xff, 0xff]), { timeout: 5000 });
  await nc.request("lanes.stats", nats.Empty, { timeout: 5000 });
  const stats = await collect(client.stats("lanesched", llama.id));
  assert.equal(stats.length, 1);
  const s = stats[0];
  assert.equal(s.type, "io.nats.micro.v1.stats_response");
  assert.ok(!Number.isNaN(Date.parse(s.started)), s.started);
  const submit = s.endpoints.find((e) => e.name === "submit");
  assert.equal(submit.num_requests, 1);
  assert.equal(submit.num_errors, 1);
  assert.match(submit.last_error, /^malformed/);
  assert.ok(submit.processing_time > 0);
  const st = s.endpoints.find((e) => e.name === "stats");
  assert.ok(st.num_requests >= 1, JSON.stringify(st));
  assert.equal(st.num_errors, 0);
});

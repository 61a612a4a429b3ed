// load-client.mjs - an independent load client for lanesched, written from subjects.md alone: it
// links nothing of the project (no clients/, no codec/) and speaks the wire contract with its own
// minimal protobuf writer and reader, its own XXH64 for shape signatures (checked against the
// test vectors of subjects.md at start), and nats.js for the transport. It submits items of many
// shapes and spread lengths with a window of Submits in flight, consumes them with consumers that
// keep pulls open and ack every batch, and checks what a client can check:
//
//   - every item ACCEPTED (the retryable words of subjects.md, too_many_shapes, queue_full, ...,
//     are retried with the same ids after a pause; a permanent word fails the run);
//   - every item delivered once, with its own tokens and payload, in a batch of its model and
//     shape whose pad_to and size keep the consumer's contract ("What a batch promises");
//   - every AckReply acknowledging the whole batch;
//   - lanes.stats' tokens_received and tokens_completed both grew by the tokens submitted.
//
// It reports items/s end to end (first Submit to last AckReply) and exits 0 only when every check
// holds. Run against a daemon that is already up:
//
//   node tests/node/load-client.mjs --server nats://127.0.0.1:4222 --items 20000 --mix zipf
//
// The mixes differ from lanesched-bench's on purpose (build for traffic in general, not for one
// generator): "zipf" is 3 models x 100 shapes (Zipf 0.8), lengths bimodal (70% log-uniform
// 16-256, 30% log-uniform 1,000-8,192), payloads 16-2,048 bytes, Submits of 1-128 items, shapes
// sent as component hashes, as a signature or as both; "flat" is 1 model x 600 shapes of equal
// popularity, lengths uniform in 1-4,096, 300-byte payloads, Submits of 100. Consumers declare
// caches of 1-3 (zipf) or 4-16 (flat) shapes.
//
// tests/node/load.test.mjs runs both mixes against a fresh nats-server and lanesched (CTest
// node_load_client, label smoke).
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";

let nats;
try {
  nats = await import("nats");
} catch (e) {
  throw new Error(`the npm package "nats" is missing: run npm ci --prefix tests/node (${e.message})`);
}

// ---- XXH64 (subjects.md, "Shape signatures") ------------------------------------------------

const M64 = (1n << 64n) - 1n;
const P1 = 0x9e3779b185ebca87n;
const P2 = 0xc2b2ae3d27d4eb4fn;
const P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n;
const P5 = 0x27d4eb2f165667c5n;
const rotl = (x, r) => ((x << r) | (x >> (64n - r))) & M64;
const round = (acc, v) => (rotl((acc + v * P2) & M64, 31n) * P1) & M64;
const merge = (h, v) => (((h ^ round(0n, v)) * P1 + P4) & M64);

function read64(b, i) {
  let v = 0n;
  for (let k = 7; k >= 0; k--) v = (v << 8n) | BigInt(b[i + k]);
  return v;
}

export function xxh64(bytes, seed = 0n) {
  const len = bytes.length;
  let i = 0;
  let h;
  if (len >= 32) {
    let v1 = (seed + P1 + P2) & M64, v2 = (seed + P2) & M64, v3 = seed, v4 = (seed - P1) & M64;
    for (; i + 32 <= len; i += 32) {
      v1 = round(v1, read64(bytes, i));
      v2 = round(v2, read64(bytes, i + 8));
      v3 = round(v3, read64(bytes, i + 16));
      v4 = round(v4, read64(bytes, i + 24));
    }
    h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & M64;
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = (seed + P5) & M64;
  }
  h = (h + BigInt(len)) & M64;
  for (; i + 8 <= len; i += 8) h = (rotl(h ^ round(0n, read64(bytes, i)), 27n) * P1 + P4) & M64;
  if (i + 4 <= len) {
    const w = BigInt(bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16)) + (BigInt(bytes[i + 3]) << 24n);
    h = (rotl(h ^ ((w * P1) & M64), 23n) * P2 + P3) & M64;
    i += 4;
  }
  for (; i < len; i++) h = (rotl(h ^ ((BigInt(bytes[i]) * P5) & M64), 11n) * P1) & M64;
  h ^= h >> 33n;
  h = (h * P2) & M64;
  h ^= h >> 29n;
  h = (h * P3) & M64;
  return h ^ (h >> 32n);
}

export function signatureOf(hashes) {
  const b = new Uint8Array(8 * hashes.length);
  hashes.forEach((h, k) => {
    for (let j = 0; j < 8; j++) b[8 * k + j] = Number((h >> BigInt(8 * j)) & 0xffn);
  });
  return xxh64(b);
}

const utf8 = (s) => new TextEncoder().encode(s);

// The vectors of subjects.md: a client whose hash disagrees would send every item to a wrong shape.
export function xxh64SelfCheck() {
  const one = xxh64(utf8("You are a helpful assistant."));
  const three = ["You are a helpful assistant.", "Answer in French.", "Tools: search, calculator."]
    .map((s) => xxh64(utf8(s)));
  const ok = xxh64(new Uint8Array(0)) === 0xef46db3751d8e999n && one === 0xe4a58ad40a48973bn &&
    signatureOf([one]) === 0x91f47f2f45b64efdn && signatureOf(three) === 0xa340b41b91cca53dn &&
    signatureOf([...three].reverse()) === 0xaf6225c57a35ec89n;
  if (!ok) throw new Error("XXH64 disagrees with the test vectors of subjects.md");
}

// ---- protobuf, the few messages of codec/lanes.proto this client needs ----------------------

class Writer {
  constructor() { this.parts = []; this.len = 0; }
  byte(b) { this.parts.push(Uint8Array.of(b)); this.len += 1; }
  raw(u8) { this.parts.push(u8); this.len += u8.length; }
  varint(v) {
    let x = BigInt(v);
    const out = [];
    do {
      let b = Number(x & 0x7fn);
      x >>= 7n;
      if (x > 0n) b |= 0x80;
      out.push(b);
    } while (x > 0n);
    this.raw(Uint8Array.from(out));
  }
  tag(field, wire) { this.varint((field << 3) | wire); }
  uint(field, v) { if (v) { this.tag(field, 0); this.varint(v); } }
  bytes(field, u8) { if (u8 && u8.length) { this.tag(field, 2); this.varint(u8.length); this.raw(u8); } }
  string(field, s) { if (s) this.bytes(field, utf8(s)); }
  fixed64(field, v) {
    this.tag(field, 1);
    const b = new Uint8Array(8);
    for (let j = 0; j < 8; j++) b[j] = Number((v >> BigInt(8 * j)) & 0xffn);
    this.raw(b);
  }
  packedFixed64(field, vs) {
    if (!vs.length) return;
    this.tag(field, 2);
    this.varint(8 * vs.length);
    for (const v of vs) {
      const b = new Uint8Array(8);
      for (let j = 0; j < 8; j++) b[j] = Number((v >> BigInt(8 * j)) & 0xffn);
      this.raw(b);
    }
  }
  message(field, w) { this.tag(field, 2); this.varint(w.len); for (const p of w.parts) this.raw(p); }
  finish() {
    const out = new Uint8Array(this.len);
    let at = 0;
    for (const p of this.parts) { out.set(p, at); at += p.length; }
    return out;
  }
}

// Fields of one message: [field, wire type, value] with varints and fixed64 as BigInt, LEN as a
// view. Unknown fields are kept and ignored by the callers (subjects.md: the contract only grows).
function fields(buf) {
  const out = [];
  let i = 0;
  const varint = () => {
    let v = 0n, s = 0n, b;
    do {
      if (i >= buf.length) throw new Error("truncated varint");
      b = buf[i++];
      v |= BigInt(b & 0x7f) << s;
      s += 7n;
    } while (b & 0x80);
    return v;
  };
  while (i < buf.length) {
    const key = Number(varint());
    const field = key >> 3, wire = key & 7;
    if (wire === 0) out.push([field, 0, varint()]);
    else if (wire === 1) { out.push([field, 1, read64(buf, i)]); i += 8; }
    else if (wire === 2) {
      const n = Number(varint());
      if (i + n > buf.length) throw new Error("truncated field");
      out.push([field, 2, buf.subarray(i, i + n)]);
      i += n;
    } else if (wire === 5) i += 4;
    else throw new Error(`wire type ${wire}`);
  }
  return out;
}

const text = (u8) => new TextDecoder().decode(u8);

function decodeSubmitReply(buf) {
  const r = { results: [], error: "" };
  for (const [f, , v] of fields(buf)) {
    if (f === 1) {
      const x = { id: "", status: 0, reason: "", error: "" };
      for (const [g, , w] of fields(v)) {
        if (g === 1) x.id = text(w);
        else if (g === 2) x.status = Number(w);
        else if (g === 3) x.reason = text(w);
        else if (g === 4) x.error = text(w);
      }
      r.results.push(x);
    } else if (f === 2) r.error = text(v);
  }
  return r;
}

function decodeRegistered(buf) {
  const names = { 1: "consumer_id", 2: "pull_subject", 3: "ack_subject", 4: "heartbeat_subject",
    5: "bye_subject", 9: "error" };
  const nums = { 6: "heartbeat_ms", 7: "dead_after_ms", 8: "ack_wait_ms", 10: "protocol_version" };
  const r = { error: "", heartbeat_ms: 0 };
  for (const [f, , v] of fields(buf)) {
    if (names[f]) r[names[f]] = text(v);
    else if (nums[f]) r[nums[f]] = Number(v);
  }
  return r;
}

function decodeBatch(buf) {
  const b = { batch_id: 0n, model: "", signature: 0n, pad_to: 0, items: [], status: 0, error: "" };
  for (const [f, , v] of fields(buf)) {
    if (f === 1) b.batch_id = v;
    else if (f === 2) b.model = text(v);
    else if (f === 3) b.signature = v;
    else if (f === 5) b.pad_to = Number(v);
    else if (f === 6) {
      const it = { id: "", tokens: 0, payload: new Uint8Array(0), deliveries: 0 };
      for (const [g, , w] of fields(v)) {
        if (g === 1) it.id = text(w);
        else if (g === 2) it.tokens = Number(w);
        else if (g === 3) it.payload = w;
        else if (g === 5) it.deliveries = Number(w);
      }
      b.items.push(it);
    } else if (f === 7) b.status = Number(v);
    else if (f === 8) b.error = text(v);
  }
  return b;
}

function decodeAckReply(buf) {
  const r = { acked: 0, returned: 0, unknown: 0, error: "" };
  for (const [f, , v] of fields(buf)) {
    if (f === 1) r.acked = Number(v);
    else if (f === 2) r.returned = Number(v);
    else if (f === 3) r.unknown = Number(v);
    else if (f === 4) r.error = text(v);
  }
  return r;
}

// ---- the workload ----------------------------------------------------------------------------

// A small seeded generator (splitmix64 on BigInt would be slow; mulberry32 is enough here).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MIXES = {
  zipf: { models: 3, shapes: 100, zipf: 0.8, consumers: 2, cache: [1, 3], maxBatchSize: 32,
    maxBatchTokens: 16384, submit: [1, 128],
    tokens: (r) => Math.round(r() < 0.7 ? 16 * Math.pow(16, r()) : 1000 * Math.pow(8.192, r())),
    payload: (r) => 16 + Math.floor(r() * 2033) },
  flat: { models: 1, shapes: 600, zipf: 0, consumers: 3, cache: [4, 16], maxBatchSize: 64,
    maxBatchTokens: 65536, submit: [100, 100],
    tokens: (r) => 1 + Math.floor(r() * 4096), payload: () => 300 },
};

const RETRYABLE = new Set(["queue_full", "too_many_shapes", "too_many_models", "store_full",
  "store_error", "not_owner"]);

function workload(mix, n, seed) {
  const r = rng(seed);
  const models = Array.from({ length: mix.models }, (_, m) => `load-${m}`);
  const shapes = models.map((model) => Array.from({ length: mix.shapes }, (_, k) => {
    const parts = [`system prompt ${k} of ${model}`, `tool schema ${k % 7}`];
    if (k % 3 === 0) parts.push(`few-shot block ${k}`);
    const hashes = parts.map((p) => xxh64(utf8(p)));
    return { hashes, signature: signatureOf(hashes) };
  }));
  let cdf = [], sum = 0;
  for (let k = 0; k < mix.shapes; k++) { sum += Math.pow(k + 1, -mix.zipf); cdf.push(sum); }
  cdf = cdf.map((c) => c / sum);
  const tag = randomBytes(4).toString("hex");
  const items = [];
  for (let i = 0; i < n; i++) {
    const m = Math.floor(r() * mix.models);
    const u = r();
    let k = 0;
    while (cdf[k] < u) k++;
    const payload = new Uint8Array(mix.payload(r));
    for (let j = 0; j < payload.length; j++) payload[j] = (i * 31 + j) & 0xff;
    items.push({ id: `${tag}-${i}`, model: models[m], shape: shapes[m][k],
      tokens: Math.min(8192, Math.max(1, mix.tokens(r))), payload, how: Math.floor(r() * 3),
      seen: 0 });
  }
  return { models, items, byId: new Map(items.map((it) => [it.id, it])) };
}

function encodeSubmit(items) {
  const w = new Writer();
  for (const it of items) {
    const x = new Writer();
    x.string(1, it.id);
    x.string(2, it.model);
    // the three ways subjects.md allows: component hashes, the signature, or both
    if (it.how !== 1) x.packedFixed64(3, it.shape.hashes);
    if (it.how !== 0) x.fixed64(4, it.shape.signature);
    x.uint(5, it.tokens);
    x.bytes(6, it.payload);
    w.message(1, x);
  }
  return w.finish();
}

// ---- the run ---------------------------------------------------------------------------------

async function stats(nc, prefix) {
  const m = await nc.request(`${prefix}.stats`, nats.Empty, { timeout: 5000 });
  return JSON.parse(text(m.data)).counters;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function run(opts) {
  xxh64SelfCheck();
  const mix = MIXES[opts.mix || "zipf"];
  if (!mix) throw new Error(`unknown mix ${opts.mix}`);
  const prefix = opts.prefix || "lanes";
  const n = opts.items || 20000;
  const window = opts.window || 32;
  const deadline = Date.now() + (opts.timeoutMs || 120000);
  const wl = workload(mix, n, opts.seed || 7);
  const res = { mix: opts.mix || "zipf", items: n, accepted: 0, retried: 0, rejected: 0,
    consumed: 0, duplicates: 0, broken: 0, acked: 0, ackErrors: 0, tokens: 0, errors: [] };
  const fail = (what) => { if (res.errors.length < 10) res.errors.push(what); };
  for (const it of wl.items) res.tokens += it.tokens;
  const nc = await nats.connect({ servers: opts.server, name: "load-client" });
  const s0 = await stats(nc, prefix);
  const t0 = Date.now();
  let lastAck = t0;

  // consumers: per model mix.consumers of them, each with pulls open on its own inbox
  const consumers = [];
  for (const [mi, model] of wl.models.entries()) {
    for (let k = 0; k < mix.consumers; k++) {
      const cn = await nats.connect({ servers: opts.server, name: `load-consumer-${mi}-${k}` });
      const reg = new Writer();
      reg.string(1, model);
      reg.uint(2, mix.maxBatchSize);
      reg.uint(3, mix.maxBatchTokens);
      reg.string(5, `load-${mi}-${k}`);
      reg.uint(8, mix.cache[0] + (k % (mix.cache[1] - mix.cache[0] + 1)));
      const r = decodeRegistered((await cn.request(`${prefix}.register`, reg.finish(),
        { timeout: 5000 })).data);
      if (r.error) throw new Error(`register: ${r.error}`);
      const c = { cn, model, r, inbox: `_INBOX.load.${randomBytes(6).toString("hex")}`,
        open: new Map(), seq: 0, pending: 0 };
      c.hb = setInterval(() => cn.publish(r.heartbeat_subject, nats.Empty), r.heartbeat_ms || 2000);
      consumers.push(c);
    }
  }
  const pull = (c) => {
    const w = new Writer();
    w.uint(1, 2);
    w.uint(2, 2000);
    const subject = `${c.inbox}.${c.seq++}`;
    c.open.set(subject, { credits: 2, until: Date.now() + 2000 + 3000 });
    c.cn.publish(c.r.pull_subject, w.finish(), { reply: subject });
  };
  const onBatch = (c, subject, b) => {
    const p = c.open.get(subject);
    if (b.status === 1 || b.status === 2) { // EXPIRED or ERROR: the pull is over
      if (b.status === 2) fail(`pull: ${b.error}`);
      c.open.delete(subject);
      return;
    }
    if (p && --p.credits === 0) c.open.delete(subject);
    let longest = 0;
    for (const bi of b.items) {
      longest = Math.max(longest, bi.tokens);
      const it = wl.byId.get(bi.id);
      if (!it) { fail(`unknown item ${bi.id}`); res.broken++; continue; }
      if (it.seen++ > 0) res.duplicates++; else res.consumed++;
      if (it.model !== b.model || it.model !== c.model || it.shape.signature !== b.signature ||
          it.tokens !== bi.tokens || Buffer.compare(Buffer.from(it.payload), Buffer.from(bi.payload)) !== 0) {
        res.broken++;
        fail(`item ${bi.id} in batch ${b.batch_id}: model ${b.model} shape ${b.signature.toString(16)} tokens ${bi.tokens}`);
      }
    }
    const pad = Math.ceil(longest / 8) * 8;
    if (b.pad_to !== pad || b.items.length > mix.maxBatchSize ||
        (b.items.length > 1 && b.items.length * b.pad_to > mix.maxBatchTokens)) {
      res.broken++;
      fail(`batch ${b.batch_id}: ${b.items.length} items pad_to ${b.pad_to} longest ${longest}`);
    }
    const ack = new Writer();
    ack.uint(1, b.batch_id);
    ack.uint(2, 1);
    c.pending++;
    c.cn.request(c.r.ack_subject, ack.finish(), { timeout: 10000 }).then((m) => {
      const a = decodeAckReply(m.data);
      if (a.error || a.acked !== b.items.length) { res.ackErrors++; fail(`ack ${b.batch_id}: ${a.error} acked ${a.acked}`); }
      res.acked += a.acked;
      lastAck = Date.now();
    }, (e) => { res.ackErrors++; fail(`ack ${b.batch_id}: ${e.message}`); })
      .finally(() => { c.pending--; });
  };
  for (const c of consumers) {
    const sub = c.cn.subscribe(`${c.inbox}.*`);
    c.loop = (async () => {
      for await (const m of sub) {
        if (m.headers && m.headers.hasError) { c.open.delete(m.subject); continue; } // 503
        onBatch(c, m.subject, decodeBatch(m.data));
      }
    })();
    c.top = setInterval(() => {
      const now = Date.now();
      for (const [s, p] of c.open) if (p.until < now) c.open.delete(s); // silent past its wait
      while (c.open.size < 4) pull(c);
    }, 20);
  }

  // producers: Submits of mix.submit[0..1] items of one model, window in flight, retries
  const r = rng((opts.seed || 7) + 1);
  const queues = new Map(wl.models.map((m) => [m, []]));
  for (const it of wl.items) queues.get(it.model).push(it);
  let inflight = 0;
  const submitOne = async (model, batch) => {
    inflight++;
    try {
      while (batch.length) {
        let rep;
        try {
          rep = decodeSubmitReply((await nc.request(`${prefix}.submit.${model}`, encodeSubmit(batch),
            { timeout: 10000 })).data);
        } catch (e) {
          // no reply in time: the same ids again (the dedupe window answers duplicate for what landed)
          if (Date.now() > deadline) { res.rejected += batch.length; fail(`submit: ${e.message}`); return; }
          res.retried += batch.length;
          continue;
        }
        if (rep.error) { res.rejected += batch.length; fail(`submit refused: ${rep.error}`); return; }
        const again = [];
        rep.results.forEach((x, j) => {
          if (x.status === 0 || x.status === 1) res.accepted++;
          else if (RETRYABLE.has(x.reason) && Date.now() < deadline) again.push(batch[j]);
          else { res.rejected++; fail(`item ${x.id} rejected: ${x.reason} ${x.error}`); }
        });
        res.retried += again.length;
        batch = again;
        if (batch.length) await sleep(20);
      }
    } finally {
      inflight--;
    }
  };
  const sends = [];
  let model = 0;
  for (;;) {
    const left = wl.models.filter((m) => queues.get(m).length);
    if (!left.length) break;
    const q = queues.get(left[model++ % left.length]);
    const size = mix.submit[0] + Math.floor(r() * (mix.submit[1] - mix.submit[0] + 1));
    const batch = q.splice(0, size);
    while (inflight >= window) await sleep(1);
    sends.push(submitOne(batch[0].model, batch));
  }
  await Promise.all(sends);
  const tSubmitted = Date.now();
  while ((res.consumed < n || consumers.some((c) => c.pending > 0)) && Date.now() < deadline)
    await sleep(20);
  const t1 = lastAck;
  for (const c of consumers) {
    clearInterval(c.top);
    clearInterval(c.hb);
    try { await c.cn.request(c.r.bye_subject, nats.Empty, { timeout: 5000 }); } catch (e) { fail(`bye: ${e.message}`); }
    await c.cn.close();
    await c.loop;
  }
  const s1 = await stats(nc, prefix);
  await nc.close();
  res.tokensReceived = s1.tokens_received - s0.tokens_received;
  res.tokensCompleted = s1.tokens_completed - s0.tokens_completed;
  res.seconds = (t1 - t0) / 1000;
  res.submitSeconds = (tSubmitted - t0) / 1000;
  res.itemsPerSecond = n / Math.max(res.seconds, 1e-3);
  res.ok = res.accepted === n && res.rejected === 0 && res.consumed === n && res.duplicates === 0 &&
    res.broken === 0 && res.ackErrors === 0 && res.acked === n && res.tokensReceived === res.tokens &&
    res.tokensCompleted === res.tokens;
  if (res.consumed < n) fail(`${n - res.consumed} items never delivered by the deadline`);
  return res;
}

// ---- command line ---------------------------------------------------------------------------

function args(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const [k, v] = argv[i].includes("=") ? argv[i].split(/=(.*)/) : [argv[i], argv[++i]];
    const key = k.replace(/^--/, "");
    if (!["server", "prefix", "items", "mix", "window", "seed", "timeout-ms"].includes(key))
      throw new Error(`unknown flag ${k} (--server --prefix --items --mix zipf|flat --window --seed --timeout-ms)`);
    o[key === "timeout-ms" ? "timeoutMs" : key] = ["items", "window", "seed", "timeout-ms"].includes(key) ? Number(v) : v;
  }
  return o;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const o = args(process.argv.slice(2));
  o.server ||= "nats://127.0.0.1:4222";
  const res = await run(o);
  console.log(`load-client ${res.mix}: ${res.items} items, ${res.itemsPerSecond.toFixed(0)} items/s end to end ` +
    `(${res.seconds.toFixed(2)} s, submits done at ${res.submitSeconds.toFixed(2)} s), retried ${res.retried}, ` +
    `duplicates ${res.duplicates}, broken ${res.broken}, tokens ${res.tokens} = received ${res.tokensReceived} = ` +
    `completed ${res.tokensCompleted}: ${res.ok ? "OK" : "FAILED"}`);
  for (const e of res.errors) console.log(`  ${e}`);
  process.exit(res.ok ? 0 : 1);
}

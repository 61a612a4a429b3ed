// consumer.test.js - the consumer against a real nats-server and lanesched: shape-pure batches
// within the packing contract, acks, nak redelivery, prefetch, in-progress past ack_wait,
// heartbeats past dead_after, bye, and registering again once the daemon declared it dead.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Env, sleep, until } from './harness.js';
import { connect, shapeSign, encode, decode, codeWord } from '../src/index.js';

// Short timings so that deadlines pass within a test: heartbeats every 200 ms, dead after
// 1.5 s of silence, a batch returned 2 s after its dispatch or last extension (ten heartbeats,
// so a loaded machine, the sanitizer pass among them, does not let a listed batch lapse).
const HB = 200;
const DEAD = 1500;
const ACK_WAIT = 2000;
const SHAPES = [['You are a helpful assistant.'], ['Answer in French.'], ['Tools: search, calculator.']];

let env;
let client;

before(async () => {
    env = await Env.start({
        flags: ['--heartbeat-ms', `${HB}`, '--dead-after-ms', `${DEAD}`, '--ack-wait-ms', `${ACK_WAIT}`],
    });
    client = await connect({ servers: env.url, prefix: env.prefix });
});

after(async () => {
    await client?.close();
    await env?.stop();
});

async function consumerOf(model, opts = {}) {
    const c = await client.consumer({
        model,
        maxBatchSize: 8,
        maxBatchTokens: 4096,
        name: `test-${model}`,
        ...opts,
    });
    c.on('warning', () => {}); // expected in several tests; each checks what it needs
    return c;
}

async function nextBatch(c, ms = 5000) {
    const b = await c.next({ timeoutMs: ms });
    assert.ok(b, `a batch within ${ms} ms`);
    return b;
}

async function consumerStats(id) {
    const s = await client.stats();
    return s.consumers.find((c) => c.id === id);
}

async function shapeStats(model) {
    const s = await client.stats();
    return { counters: s.counters, shapes: s.models.find((m) => m.model === model)?.shapes ?? [] };
}

test('batches are shape-pure, within the packing contract, and acked', async () => {
    const c = await consumerOf('pure', { maxBatchSize: 4, maxBatchTokens: 1000, prefetch: 3 });
    const shapeOf = new Map();
    const items = Array.from({ length: 30 }, (_, i) => {
        const components = SHAPES[i % 3];
        shapeOf.set(`pure-${i}`, shapeSign(components));
        return { id: `pure-${i}`, tokens: 10 + ((i * 37) % 290), components, payload: `p${i}` };
    });
    const tokensOf = new Map(items.map((x) => [x.id, x.tokens]));
    const r = await client.submit('pure', items);
    assert.equal(r.accepted, 30);
    const seen = new Set();
    while (seen.size < 30) {
        const b = await nextBatch(c);
        assert.equal(b.model, 'pure');
        assert.equal(typeof b.batchId, 'bigint');
        assert.ok(b.items.length >= 1 && b.items.length <= 4, `len ${b.items.length} within max_batch_size`);
        const longest = Math.max(...b.items.map((x) => x.tokens));
        assert.equal(b.padTo, Math.ceil(longest / 8) * 8, 'pad_to is the longest rounded up to 8');
        assert.ok(b.items.length * b.padTo <= 1000 || b.items.length === 1, 'within max_batch_tokens');
        for (const it of b.items) {
            const id = it.id.toString();
            assert.equal(shapeOf.get(id), b.signature, `${id} has the batch's shape`);
            assert.equal(it.tokens, tokensOf.get(id));
            assert.equal(it.payload.toString(), `p${id.slice(5)}`);
            assert.equal(it.deliveries, 1);
            assert.ok(!seen.has(id), `${id} delivered once`);
            seen.add(id);
        }
        const ack = await b.ack();
        assert.deepEqual([ack.acked, ack.code], [b.items.length, '']);
        assert.equal(b.done, true);
        assert.equal(c.inProgress.has(b.batchId), false, 'a settled batch leaves the heartbeat');
        const again = await b.ack();
        assert.equal(again.code, 'unknown_batch', 'a settled batch is forgotten');
    }
    const s = await shapeStats('pure');
    assert.equal(s.shapes.length, 3);
    assert.ok(s.shapes.every((x) => x.queued_items === 0 && x.pending_items === 0));
    assert.equal(s.counters.items_completed, 30);
    await c.close();
});

test('prefetch keeps several pulls outstanding on the inbox', async () => {
    const c = await consumerOf('idle', { prefetch: 3, pullExpiresMs: 30000 });
    await until(async () => (await consumerStats(c.id))?.pulls === 3, 3000, 'three open pulls');
    // One item: one credit used, and a pull sent again right away.
    await client.submit('idle', [{ id: 'idle-1', tokens: 5 }]);
    const b = await nextBatch(c);
    assert.equal(b.items[0].id.toString(), 'idle-1');
    await until(async () => (await consumerStats(c.id))?.pulls === 3, 3000, 'three open pulls again');
    await b.ack();
    await c.close();
});

test('nak by position redelivers with deliveries 2, then 3', async () => {
    await client.submit(
        'nak',
        ['n-0', 'n-1', 'n-2'].map((id) => ({ id, tokens: 16 })),
    );
    const c = await consumerOf('nak', { prefetch: 1 });
    const b1 = await nextBatch(c);
    assert.deepEqual(
        b1.items.map((x) => x.id.toString()),
        ['n-0', 'n-1', 'n-2'],
    );
    const bad = await b1.settle({ ack: [0], nak: [5] });
    assert.deepEqual([bad.code, bad.unknown], ['unknown_position', 1], 'nothing changed');
    const r = await b1.settle({ ack: [0], nak: [2] });
    assert.deepEqual([r.acked, r.returned, r.code], [1, 1, '']);
    assert.equal(b1.done, false, 'position 1 is still in flight');
    const b2 = await nextBatch(c);
    assert.deepEqual(
        b2.items.map((x) => [x.id.toString(), x.deliveries]),
        [['n-2', 2]],
    );
    const rest = await b1.ack();
    assert.deepEqual([rest.acked, rest.code], [1, ''], 'ack all settles position 1 only');
    assert.equal((await b2.nak()).returned, 1);
    const b3 = await nextBatch(c);
    assert.deepEqual(
        b3.items.map((x) => [x.id.toString(), x.deliveries]),
        [['n-2', 3]],
    );
    assert.equal((await b3.ack()).acked, 1);
    await c.close();
});

test('in progress keeps a batch past ack_wait; without it the batch comes back', async () => {
    // By heartbeat: every delivered batch is listed until it is settled.
    await client.submit('prog', [{ id: 'prog-1', tokens: 8 }]);
    const auto = await consumerOf('prog', { prefetch: 1 });
    const b = await nextBatch(auto);
    await sleep(3 * ACK_WAIT);
    const r = await b.ack();
    assert.deepEqual([r.acked, r.code], [1, ''], 'still in flight after three ack waits');
    await auto.close();

    // By Ack.in_progress, with the heartbeat listing nothing.
    await client.submit('prog', [{ id: 'prog-2', tokens: 8 }]);
    const manual = await consumerOf('prog', { prefetch: 1, autoInProgress: false });
    const m = await nextBatch(manual);
    for (let i = 0; i < 6; i++) {
        await sleep(ACK_WAIT / 2);
        assert.equal((await m.inProgress()).code, '');
    }
    assert.deepEqual([(await m.ack()).acked], [1]);

    assert.equal(manual.inProgress.size, 0, 'autoInProgress false lists nothing');
    await manual.close();

    // Released (no longer listed) and not settled: the deadline returns it, and it comes again
    // with deliveries 2.
    const auto2 = await consumerOf('prog', { prefetch: 1 });
    await client.submit('prog', [{ id: 'prog-3', tokens: 8 }]);
    const late = await nextBatch(auto2);
    assert.equal(late.items[0].id.toString(), 'prog-3');
    assert.equal(auto2.inProgress.has(late.batchId), true);
    late.release();
    assert.equal(auto2.inProgress.has(late.batchId), false);
    const again = await nextBatch(auto2, 4 * ACK_WAIT);
    assert.deepEqual(
        again.items.map((x) => [x.id.toString(), x.deliveries]),
        [['prog-3', 2]],
    );
    assert.equal((await late.ack()).code, 'unknown_batch', 'the first copy was returned');
    assert.equal((await again.ack()).acked, 1);
    await auto2.close();
});

test('heartbeats keep an idle consumer alive past dead_after; silence kills', async () => {
    const beating = await consumerOf('hb', { prefetch: 0 });
    const silent = await consumerOf('hb', { prefetch: 0, heartbeatMs: 0 });
    await sleep(3 * DEAD);
    assert.equal((await consumerStats(beating.id)).alive, true);
    assert.equal((await consumerStats(silent.id)).alive, false);
    // The same answer on the wire: an Ack for batch 0 tells a known id from a dead one.
    const ask = async (c) => {
        const m = await client.nc.request(c.info.ackSubject, encode('Ack', {}), { timeout: 2000 });
        return codeWord(decode('AckReply', m.data).error);
    };
    assert.equal(await ask(beating), 'unknown_batch');
    assert.equal(await ask(silent), 'unknown_consumer');
    await beating.close();
    await silent.close({ bye: false });
});

test('bye returns the unfinished batches at once; a close without bye does not', async () => {
    await client.submit(
        'bye',
        ['b-0', 'b-1'].map((id) => ({ id, tokens: 8 })),
    );
    const a = await consumerOf('bye', { prefetch: 1 });
    const held = await nextBatch(a);
    assert.equal(held.items.length, 2);
    const before = (await shapeStats('bye')).counters.items_returned;
    const reply = await a.close();
    assert.deepEqual(reply, { error: '', code: '' });
    const s = await shapeStats('bye');
    assert.equal(s.counters.items_returned, before + 2, 'returned by the bye itself');
    assert.equal(s.shapes[0].queued_items, 2);
    assert.equal((await consumerStats(a.id)).alive, false);
    assert.equal(await a.next(), null, 'a closed consumer yields nothing');

    const b = await consumerOf('bye', { prefetch: 1 });
    const again = await nextBatch(b);
    assert.deepEqual(
        again.items.map((x) => [x.id.toString(), x.deliveries]),
        [
            ['b-0', 2],
            ['b-1', 2],
        ],
    );
    await b.close({ bye: false });
    const s2 = await shapeStats('bye');
    assert.equal(s2.shapes[0].pending_items, 2, 'without bye the batch stays in flight');
    assert.equal((await consumerStats(b.id)).alive, true);
});

test('a consumer declared dead registers again and keeps working', async () => {
    const c = await consumerOf('dead', { prefetch: 1 });
    const first = c.id;
    const registered = [];
    c.on('registered', (info) => registered.push(info.consumerId));
    // Block the event loop past dead_after: no heartbeat can leave.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, DEAD + 1000);
    await until(() => registered.length > 0, 5000, 'a new registration');
    assert.notEqual(c.id, first);
    assert.equal(c.info.protocolVersion >= 1, true);
    await client.submit('dead', [{ id: 'd-1', tokens: 8 }]);
    const b = await nextBatch(c);
    assert.equal(b.items[0].id.toString(), 'd-1');
    assert.equal((await b.ack()).acked, 1);
    assert.equal((await consumerStats(first)).alive, false);
    await c.close();
});

test('a refused registration throws its code word', async () => {
    await assert.rejects(client.consumer({ model: 'x', maxBatchSize: 8, maxBatchTokens: 0 }), {
        name: 'LanesError',
        code: 'zero_batch_tokens',
    });
    await assert.rejects(client.consumer({ model: 'a..b', maxBatchSize: 8, maxBatchTokens: 8 }), {
        code: 'bad_model_name',
    });
});

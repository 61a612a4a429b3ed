// producer.test.js - the producer against a real nats-server and lanesched: accepted,
// duplicate and rejected items with their reason words, submits cut to the server's
// max_payload, retries that resend the same bytes, and a submit that waits for the daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Env, sleep } from './harness.js';
import { connect, shapeSign, shapeHash, encode, decode, LanesError } from '../src/index.js';

const SYS = 'You are a helpful assistant.';
let env;
let client;

before(async () => {
    // A small max_payload so that cutting submits is exercised with a few thousand items.
    env = await Env.start({ natsConfig: 'max_payload: 65536' });
    client = await connect({ servers: env.url, prefix: env.prefix });
});

after(async () => {
    await client?.close();
    await env?.stop();
});

test('accepted, duplicate and rejected, each with its reason word', async () => {
    const items = [
        { id: 'p-1', tokens: 120, components: [SYS], payload: 'hello', replyTo: 'results.job-1' },
        { id: 'p-2', tokens: 300, componentHashes: [shapeHash(SYS)] },
        { id: 'p-1', tokens: 120, components: [SYS] }, // again in the same message
        { id: 'p-3', tokens: 0, components: [SYS] },
        { id: 'x'.repeat(65), tokens: 5 },
        { id: '', tokens: 5 },
        { id: 'p-4', tokens: 5, componentHashes: [shapeHash(SYS)], signature: 12345n },
    ];
    const r = await client.submit('llama', items);
    assert.deepEqual(
        r.results.map((x) => [x.status, x.reason]),
        [
            ['accepted', 'ok'],
            ['accepted', 'ok'],
            ['duplicate', 'duplicate'],
            ['rejected', 'zero_tokens'],
            ['rejected', 'id_too_long'],
            ['rejected', 'bad_id'],
            ['rejected', 'signature_mismatch'],
        ],
    );
    assert.deepEqual(
        r.results.map((x) => x.id),
        items.map((x) => x.id),
        'results in item order',
    );
    assert.deepEqual([r.accepted, r.duplicate, r.rejected], [2, 1, 4]);
    assert.equal(r.results[0].error, '', 'ok carries no text');
    assert.ok(r.results[3].error.length > 0, 'a rejection carries text for people');

    // Sent again: everything stored is a duplicate now, the rejections stay rejections.
    const again = await client.submit('llama', items.slice(0, 4));
    assert.deepEqual(
        again.results.map((x) => x.status),
        ['duplicate', 'duplicate', 'duplicate', 'rejected'],
    );

    const stats = await client.stats();
    assert.equal(stats.counters.items_received, 2);
    assert.equal(stats.counters.rejected.zero_tokens, 2);
    const shape = stats.models.find((m) => m.model === 'llama').shapes[0];
    assert.equal(shape.signature, '0x91f47f2f45b64efd', 'both shape forms are the same shape');
    assert.equal(shape.queued_items, 2);
});

test('a submit larger than max_payload is cut, and every reply fits', async () => {
    const payload = Buffer.alloc(100, 7);
    const items = Array.from({ length: 2000 }, (_, i) => ({
        id: `big-${i}`,
        tokens: 10,
        payload,
        components: [SYS],
    }));
    const r = await client.submit('cut', items);
    assert.equal(r.accepted, 2000, JSON.stringify(r.results.find((x) => x.status !== 'accepted')));
    // 2,000 rejections answer with text for each: the reply is larger than the message, and
    // would not fit one NATS message if the submit were cut by message size alone.
    const bad = Array.from({ length: 2000 }, (_, i) => ({ id: `bad-${i}`, tokens: 0 }));
    const rb = await client.submit('cut', bad, { timeoutMs: 3000, retryForMs: 6000, maxItems: 5000 });
    assert.equal(rb.rejected, 2000);
    assert.ok(rb.results.every((x) => x.reason === 'zero_tokens'));
    // An item that cannot fit a NATS message alone is refused here and the others go on.
    const huge = [
        { id: 'huge', tokens: 1, payload: Buffer.alloc(70000) },
        { id: 'small', tokens: 1 },
    ];
    const rh = await client.submit('cut', huge);
    assert.deepEqual(
        rh.results.map((x) => x.reason),
        ['payload_too_large', 'ok'],
    );
    // One the daemon refuses: over its --max-payload, lowered to the server's 65,536 - 8,192.
    const rd = await client.submit('cut', [{ id: 'mid', tokens: 1, payload: Buffer.alloc(60000) }]);
    assert.equal(rd.results[0].reason, 'payload_too_large');
    const stats = await client.stats();
    assert.equal(stats.counters.rejected.payload_too_large, 1, 'the daemon judged the 60,000-byte one');
});

test('a retry resends the same bytes: the same ids', async () => {
    // A responder of our own on another prefix drops the first attempt and answers the second.
    const nc = await env.connection();
    const seen = [];
    const sub = nc.subscribe('fake.submit.llama', {
        callback: (_err, msg) => {
            seen.push(Buffer.from(msg.data));
            if (seen.length < 2) return;
            const sub = decode('Submit', msg.data);
            const results = sub.items.map((it) => ({ id: it.id, reason: 'ok' }));
            msg.respond(encode('SubmitReply', { results }));
        },
    });
    await nc.flush();
    const fake = await connect({ nc: client.nc, prefix: 'fake' });
    const r = await fake.submit(
        'llama',
        [
            { id: 'r-1', tokens: 3 },
            { id: 'r-2', tokens: 4 },
        ],
        {
            timeoutMs: 300,
            retryForMs: 5000,
        },
    );
    sub.unsubscribe();
    assert.equal(seen.length, 2);
    assert.deepEqual(seen[1], seen[0], 'the retry is byte for byte the first attempt');
    assert.deepEqual(
        decode('Submit', seen[0]).items.map((i) => i.id.toString()),
        ['r-1', 'r-2'],
    );
    assert.equal(r.accepted, 2);
    await fake.close(); // borrowed connection: left open
    assert.equal(client.nc.isClosed(), false);

    // Nobody answers at all: a timeout word, once retryForMs has passed.
    const t0 = Date.now();
    const none = await fake
        .submit('llama', [{ id: 'r-3', tokens: 1 }], { timeoutMs: 200, retryForMs: 700 })
        .catch((e) => e);
    assert.ok(none instanceof LanesError);
    assert.ok(['no_responders', 'timeout'].includes(none.code), none.message);
    assert.ok(Date.now() - t0 >= 600, 'it kept retrying for retryForMs');
});

test('a submit made while the daemon is down goes in once it is back', async () => {
    await env.daemonStop('SIGTERM');
    const pending = client.submit('later', [{ id: 'l-1', tokens: 7, components: [SYS] }], {
        retryForMs: 20000,
    });
    await sleep(700); // several attempts get "no responders"
    await env.daemonStart();
    const r = await pending;
    assert.deepEqual(
        r.results.map((x) => x.reason),
        ['ok'],
    );
    const again = await client.submit('later', [{ id: 'l-1', tokens: 7, components: [SYS] }]);
    assert.equal(again.results[0].status, 'duplicate', 'the restarted window knows the stored id');
    assert.equal(shapeSign([SYS]), 0x91f47f2f45b64efdn);
});

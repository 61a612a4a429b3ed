// restart.test.js - the daemon crashes (SIGKILL) and starts again on the same data directory:
// the consumer learns it is unknown, registers again and gets the work that was queued or in
// flight, and a producer's submit made during the outage goes in once the daemon is back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Env, sleep, until } from './harness.js';
import { connect } from '../src/index.js';
import { encode, BatchStatus } from '../src/codec.js';

const FLAGS = ['--heartbeat-ms', '200', '--dead-after-ms', '1500', '--ack-wait-ms', '1000'];
let env;
let client;

before(async () => {
    env = await Env.start({ flags: FLAGS });
    client = await connect({ servers: env.url, prefix: env.prefix });
});

after(async () => {
    await client?.close();
    await env?.stop();
});

test('after a daemon restart the consumer registers again and the queued work is delivered', async () => {
    const ids = ['r-0', 'r-1', 'r-2', 'r-3', 'r-4'];
    const r = await client.submit(
        'r',
        ids.map((id) => ({ id, tokens: 8 })),
    );
    assert.equal(r.accepted, 5);
    // One item a batch and one batch ahead: r-0 is held (in flight), r-1 waits in the
    // consumer, the other three stay queued in the daemon.
    const c = await client.consumer({
        model: 'r',
        maxBatchSize: 1,
        maxBatchTokens: 64,
        prefetch: 1,
        pullExpiresMs: 1000,
    });
    const warnings = [];
    c.on('warning', (w) => warnings.push(w.code ?? w.message));
    const registered = [];
    c.on('registered', (info) => registered.push(info.consumerId));
    const first = c.id;
    const held = await c.next({ timeoutMs: 5000 });
    assert.equal(held.items[0].id.toString(), 'r-0');
    await until(async () => (await client.stats()).counters.pending_items === 2, 5000, 'r-1 dispatched too');

    await env.daemonStop('SIGKILL');
    // While it is down a producer submits; its retries get "no responders" until it is back.
    const late = client.submit('r', [{ id: 'r-late', tokens: 8 }], { retryForMs: 30000 });
    await sleep(500);
    await env.daemonStart(FLAGS);
    assert.equal((await late).accepted, 1);

    // Everything comes to the new registration: in flight and queued alike, nothing lost. r-1,
    // taken from the consumer's own queue, was dispatched to the forgotten id: its ack says so,
    // and the item comes again.
    const got = new Map();
    const stale = [];
    while (got.size < 6) {
        const b = await c.next({ timeoutMs: 10000 });
        assert.ok(b, `all six items after the restart (have ${[...got.keys()]})`);
        const ack = await b.ack();
        const names = b.items.map((it) => it.id.toString());
        if (ack.code === 'unknown_consumer') {
            stale.push(...names);
            continue;
        }
        assert.equal(ack.code, '');
        for (const it of b.items) got.set(it.id.toString(), it.deliveries);
    }
    assert.deepEqual(stale, ['r-1'], 'only the batch taken before the restart was stale');
    assert.deepEqual([...got.keys()].sort(), [...ids, 'r-late'].sort());
    // Delivery counts are written with the item when its batch is dispatched (--store disk), so
    // they survive the crash: the two items dispatched before it come a second time.
    assert.deepEqual(
        Object.fromEntries([...got.entries()].sort()),
        { 'r-0': 2, 'r-1': 2, 'r-2': 1, 'r-3': 1, 'r-4': 1, 'r-late': 1 },
        'delivery counts survive a restart',
    );
    assert.notEqual(c.id, first, 'a new consumer id');
    assert.equal(registered.length, 1, 'registered again exactly once');
    assert.ok(warnings.length > 0, 'the consumer said why');

    // The batch held across the crash belongs to the forgotten id.
    assert.equal((await held.ack()).code, 'unknown_consumer');
    const s = await client.stats();
    assert.equal(s.counters.items_completed, 6);
    assert.equal(s.counters.pending_items, 0);
    assert.equal(s.consumers.filter((x) => x.alive).length, 1);
    await c.close();
});

async function idleConsumer(model) {
    const c = await client.consumer({
        model,
        maxBatchSize: 4,
        maxBatchTokens: 64,
        prefetch: 2,
        pullExpiresMs: 500,
    });
    const registered = [];
    const warnings = [];
    const t0 = Date.now();
    c.on('registered', (info) => registered.push(info.consumerId));
    c.on('warning', (w) => warnings.push(`${Date.now() - t0} ms: ${w.code ?? ''} ${w.message}`));
    return { c, registered, warnings, first: c.id };
}

/** until(), with what the consumer warned about on the way in the failure's text. */
async function untilWarned(cond, ms, what, warnings) {
    try {
        await until(cond, ms, what);
    } catch (err) {
        err.message += `; the consumer's warnings: ${warnings.join(' | ') || 'none'}`;
        throw err;
    }
}

async function stillWorks(c, model) {
    assert.equal((await client.submit(model, [{ id: `${model}-1`, tokens: 8 }])).accepted, 1);
    const b = await c.next({ timeoutMs: 10000 });
    assert.ok(b, 'a batch after registering again');
    assert.equal(b.items[0].id.toString(), `${model}-1`);
    assert.equal((await b.ack()).code, '');
}

test('an idle consumer registers again through its pull deadline while the daemon is down', async () => {
    const { c, registered, warnings, first } = await idleConsumer('idle-down');
    await env.daemonStop('SIGKILL');
    await sleep(2500); // its pulls' deadlines pass: the probe and Register get "no responders"
    assert.equal(registered.length, 0);
    await env.daemonStart([...FLAGS, '--models', 'idle-down']);
    await untilWarned(
        () => registered.length >= 1,
        10000,
        'registering again once the daemon is back',
        warnings,
    );
    assert.notEqual(c.id, first);
    await stillWorks(c, 'idle-down');
    await c.close();
});

test('an idle consumer registers again when a restarted --models daemon ignores its id', async () => {
    const models = [...FLAGS, '--models', 'idle-models'];
    await env.daemonStop('SIGTERM');
    await env.daemonStart(models);
    const { c, registered, warnings, first } = await idleConsumer('idle-models');
    await env.daemonStop('SIGKILL');
    // Back at once: the pulls were lost with the old process, and this instance answers
    // nothing for an id it never issued; only the consumer's own time-outs can tell it.
    await env.daemonStart(models);
    // The consumer finds out by itself: a pull deadline (500 + 1,000 ms), a probe of one 2 s
    // try, then Register. (Its two pulls, sent in the instant the daemon died, once came back as
    // the server's no-responders status, which the consumer took for two empty batches that
    // filled its prefetch for good: the last case below.)
    await untilWarned(() => registered.length >= 1, 15000, 'registering again', warnings);
    assert.notEqual(c.id, first);
    await stillWorks(c, 'idle-models');
    await c.close();
});

test('a pull that reaches no daemon gets the server status, which is a lost pull and not a batch', async () => {
    await env.daemonStop('SIGTERM'); // the one before serves --models idle-models only
    await env.daemonStart(FLAGS);
    const { c, registered, warnings } = await idleConsumer('no-responders');
    await env.daemonStop('SIGKILL');
    // Pulls sent while nothing serves the pull subject: nats-server answers each with a
    // "503 no responders" status message, empty body, on the consumer's inbox. (Internal call:
    // the consumer itself only pulls like this in the instant a daemon dies.)
    c.pull();
    c.pull();
    await sleep(300);
    assert.equal(c.queue.length, 0, 'a status message was taken for a Batch');
    await env.daemonStart(FLAGS);
    await untilWarned(() => registered.length >= 1, 20000, 'registering again', warnings);
    await stillWorks(c, 'no-responders');
    await c.close();
});

test('a daemon that forgets every registration at once gets registrations with backoff', async () => {
    await env.daemonStop('SIGKILL');
    // A fake on the daemon's subjects: every Register answered, every pull with unknown_consumer.
    const nc = await env.connection();
    let registers = 0;
    const reg = nc.subscribe(`${env.prefix}.register.forgetful`, {
        callback: (err, m) => {
            registers++;
            m.respond(
                encode('Registered', {
                    consumer_id: `fake${registers}`,
                    pull_subject: 'fake.pull',
                    ack_subject: 'fake.ack',
                    heartbeat_subject: 'fake.heartbeat',
                    bye_subject: 'fake.bye',
                    heartbeat_ms: 1000,
                    dead_after_ms: 10000,
                    ack_wait_ms: 30000,
                }),
            );
        },
    });
    const pull = nc.subscribe('fake.pull', {
        callback: (err, m) =>
            m.respond(
                encode('Batch', {
                    status: BatchStatus.BATCH_STATUS_ERROR,
                    error: 'unknown_consumer: register again to get a consumer id',
                }),
            ),
    });
    try {
        const c = await client.consumer({ model: 'forgetful', maxBatchSize: 4, maxBatchTokens: 64 });
        c.on('warning', () => {});
        await sleep(3000);
        await c.close();
    } finally {
        reg.unsubscribe();
        pull.unsubscribe();
        await env.daemonStart(FLAGS);
    }
    // Waits of 0, 0.2, 0.4, 0.8 and 1.6 s fit in 3 s: about 5 registrations.
    assert.ok(registers >= 3 && registers <= 8, `${registers} registrations in 3 s`);
});

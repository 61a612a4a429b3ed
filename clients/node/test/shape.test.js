// shape.test.js - no server: the signature test vectors of subjects.md, the codec's 64-bit and
// byte handling, and how a Submit is cut to fit max_payload.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
    shapeHash,
    shapeSign,
    shapeSignHashes,
    shapeFormat,
    shapeParse,
    encode,
    decode,
    ItemStatus,
    BatchStatus,
    submitPlan,
    workItem,
    REPLY_BYTES_PER_ITEM,
} from '../src/index.js';

const SYS = 'You are a helpful assistant.';
const FR = 'Answer in French.';
const TOOLS = 'Tools: search, calculator.';
// 109 bytes: XXH64's path for inputs of 32 bytes and more, as the five components' 40 bytes
const LONG =
    'Context: the user is a customer of an online bookshop and asks about orders, deliveries, ' +
    'returns and refunds.';

// subjects.md, "Shape signatures and test vectors", copied by hand.
const VECTORS = [
    { name: 'empty', components: [], hashes: [], signature: 0xef46db3751d8e999n },
    { name: 'one', components: [SYS], hashes: [0xe4a58ad40a48973bn], signature: 0x91f47f2f45b64efdn },
    {
        name: 'three',
        components: [SYS, FR, TOOLS],
        hashes: [0xe4a58ad40a48973bn, 0x6fd2a283f58d194en, 0x425afd5d136c7e5en],
        signature: 0xa340b41b91cca53dn,
    },
    {
        name: 'three reversed',
        components: [TOOLS, FR, SYS],
        hashes: [0x425afd5d136c7e5en, 0x6fd2a283f58d194en, 0xe4a58ad40a48973bn],
        signature: 0xaf6225c57a35ec89n,
    },
    {
        name: 'five',
        components: [SYS, FR, TOOLS, LONG, 'Be brief.'],
        hashes: [
            0xe4a58ad40a48973bn,
            0x6fd2a283f58d194en,
            0x425afd5d136c7e5en,
            0x5e1f688af88d97abn,
            0x52a4b236d9228cc6n,
        ],
        signature: 0x6a17c9adc0a244e4n,
    },
];

test('signatures match the test vectors', () => {
    for (const v of VECTORS) {
        assert.deepEqual(v.components.map(shapeHash), v.hashes, `${v.name}: component hashes`);
        assert.equal(shapeSignHashes(v.hashes), v.signature, `${v.name}: signature of the hashes`);
        assert.equal(shapeSign(v.components), v.signature, `${v.name}: signature of the components`);
        assert.equal(typeof shapeSign(v.components), 'bigint');
    }
    // Bytes and strings hash alike (UTF-8, no terminator).
    assert.equal(shapeHash(new TextEncoder().encode(SYS)), 0xe4a58ad40a48973bn);
});

test('the "three" vector hashes the 24 little-endian bytes subjects.md lists', () => {
    const listed = '3b 97 48 0a d4 8a a5 e4 4e 19 8d f5 83 a2 d2 6f 5e 7e 6c 13 5d fd 5a 42';
    const bytes = Buffer.from(listed.replaceAll(' ', ''), 'hex');
    const mine = Buffer.alloc(24);
    VECTORS[2].hashes.forEach((h, i) => mine.writeBigUInt64LE(h, 8 * i));
    assert.deepEqual(mine, bytes);
    assert.equal(shapeHash(bytes), VECTORS[2].signature, 'the signature is XXH64 of those bytes');
});

test("subjects.md's own vector table agrees with this package", (t) => {
    const md = fileURLToPath(new URL('../../../subjects.md', import.meta.url));
    if (!fs.existsSync(md)) {
        t.skip('subjects.md is not beside this package');
        return;
    }
    const rows = fs
        .readFileSync(md, 'utf8')
        .split('\n')
        .filter((l) => /^\| (empty|one|three|three reversed) \|/.test(l));
    assert.equal(rows.length, 4, 'four vector rows in subjects.md');
    for (const row of rows) {
        const cells = row.split('|').map((c) => c.trim());
        const v = VECTORS.find((x) => x.name === cells[1]);
        const hexes = (s) => [...s.matchAll(/0x[0-9a-f]{16}/g)].map((m) => BigInt(m[0]));
        assert.deepEqual(hexes(cells[3]), v.hashes, `${v.name}: hashes column`);
        assert.deepEqual(hexes(cells[4]), [v.signature], `${v.name}: signature column`);
        assert.equal(shapeSign(v.components), v.signature);
    }
});

test('format and parse keep all 64 bits', () => {
    assert.equal(shapeFormat(0x91f47f2f45b64efdn), '0x91f47f2f45b64efd');
    assert.equal(shapeFormat(1n), '0x0000000000000001');
    assert.equal(shapeParse('0xffffffffffffffff'), 2n ** 64n - 1n);
    assert.throws(() => shapeParse('0x1ffffffffffffffff'), SyntaxError);
    assert.throws(() => shapeParse('zz'), SyntaxError);
});

test('fixed64 travels little-endian and decodes to the same BigInt', () => {
    const bytes = encode('WorkItem', { id: 'req-1', signature: 0x91f47f2f45b64efdn });
    // field 4, wire type 1 (tag 0x21), then the 8 bytes low first
    assert.equal(Buffer.from(bytes).toString('hex'), '0a057265712d3121fd4eb6452f7ff491');
    const back = decode('WorkItem', bytes);
    assert.equal(back.signature, 0x91f47f2f45b64efdn);
    assert.deepEqual(back.id, Buffer.from('req-1'));
    const max = decode('Batch', encode('Batch', { batch_id: 2n ** 64n - 1n, signature: 2n ** 63n }));
    assert.equal(max.batch_id, 2n ** 64n - 1n);
    assert.equal(max.signature, 2n ** 63n);
    assert.throws(() => encode('Batch', { batch_id: 2 ** 60 }), RangeError, 'an unsafe number is refused');
});

test('enum names and proto3 zero values as protobufjs sees them', () => {
    assert.deepEqual(
        { ...ItemStatus },
        { ITEM_STATUS_ACCEPTED: 0, ITEM_STATUS_DUPLICATE: 1, ITEM_STATUS_REJECTED: 2 },
    );
    assert.deepEqual(
        { ...BatchStatus },
        { BATCH_STATUS_OK: 0, BATCH_STATUS_EXPIRED: 1, BATCH_STATUS_ERROR: 2 },
    );
    const empty = decode('Batch', new Uint8Array(0));
    assert.equal(empty.status, BatchStatus.BATCH_STATUS_OK);
    assert.equal(empty.batch_id, 0n);
    assert.deepEqual(empty.items, []);
    assert.equal(decode('ItemResult', new Uint8Array(0)).status, ItemStatus.ITEM_STATUS_ACCEPTED);
});

test('a work item gets its shape from components, a signature, or hashes', () => {
    assert.equal(workItem('m', { id: 'a', tokens: 1, components: [SYS] }).signature, 0x91f47f2f45b64efdn);
    assert.equal(workItem('m', { id: 'a', tokens: 1 }).signature, 0xef46db3751d8e999n);
    const h = workItem('m', { id: 'a', tokens: 1, componentHashes: [1n] });
    assert.equal(h.signature, undefined, 'hashes alone: the daemon computes the signature');
    assert.deepEqual(h.component_hashes, [1n]);
    assert.equal(workItem('m', { id: 'a', tokens: 1, createdUnixNs: 5n }).created_unix_ns, 5n);
});

test('a Submit is cut so that it and its reply fit max_payload', () => {
    const mk = (n, size, idLen = 8) =>
        Array.from({ length: n }, () => ({ bytes: new Uint8Array(size), idLen }));
    // 100 items of 100 bytes (102 framed) in 1,256 bytes.
    let p = submitPlan(mk(100, 100), 1256, 1000);
    assert.ok(
        p.chunks.every((c) => c.length * 102 <= 1256),
        'message size per chunk',
    );
    assert.ok(p.chunks.every((c) => c.length * (REPLY_BYTES_PER_ITEM + 8) + 256 <= 1256));
    assert.equal(p.chunks.flat().length, 100);
    // Tiny items: the reply budget decides, not the message size.
    p = submitPlan(mk(1000, 10), 10000, 1000);
    const perReply = REPLY_BYTES_PER_ITEM + 8;
    assert.ok(
        p.chunks.every((c) => c.length * perReply + 256 <= 10000),
        'reply budget per chunk',
    );
    assert.ok(p.chunks.length >= Math.ceil(1000 / Math.floor((10000 - 256) / perReply)));
    // The item-count cap.
    p = submitPlan(mk(25, 10), 1 << 20, 10);
    assert.deepEqual(
        p.chunks.map((c) => c.length),
        [10, 10, 5],
    );
    // One item too large alone is left out; the rest go on, in order.
    const items = [...mk(2, 10), { bytes: new Uint8Array(5000), idLen: 8 }, ...mk(2, 10)];
    p = submitPlan(items, 4000, 1000);
    assert.deepEqual(p.oversized, [2]);
    assert.deepEqual(p.chunks.flat(), [0, 1, 3, 4]);
});

test('Registered: the protocol version is field 10, absent = version 1', async () => {
    const { registeredOf } = await import('../src/consumer.js');
    const { types } = await import('../src/codec.js');
    const base = Buffer.from(encode('Registered', { consumer_id: 'c', heartbeat_ms: 2000 }));
    assert.equal(registeredOf(decode('Registered', base)).protocolVersion, 1, 'not sent: version 1');
    assert.equal(registeredOf(decode('Registered', base)).heartbeatMs, 2000);
    // Field 10, varint 3, appended by hand: read when the schema has field 10.
    const withV = Buffer.concat([base, Buffer.from([0x50, 0x03])]);
    const want = types.Registered.fieldsById[10] ? 3 : 1;
    assert.equal(registeredOf(decode('Registered', withV)).protocolVersion, want);
});

test('every reason word and text of the daemon fits the reply budget per item', (t) => {
    const header = fileURLToPath(new URL('../../../codec/codec.h', import.meta.url));
    if (!fs.existsSync(header)) {
        t.skip('codec/codec.h is not beside this package');
        return;
    }
    const src = fs.readFileSync(header, 'utf8');
    const map = src.slice(src.indexOf('#define CODEC_STATUS_MAP'), src.indexOf('STATUS_ENUM(codec_status_t'));
    const entries = [
        ...map.replaceAll('\\\n', ' ').matchAll(/X\((\w+),\s*"([^"]*)",\s*((?:"[^"]*"\s*)+)\)/g),
    ];
    assert.ok(entries.length >= 19, `CODEC_STATUS_MAP read (${entries.length} entries)`);
    const id = Buffer.alloc(64, 0x61); // the longest id
    for (const [, , word, texts] of entries) {
        const text = [...texts.matchAll(/"([^"]*)"/g)].map((m) => m[1]).join('');
        const one = encode('ItemResult', { id, status: 2, reason: word, error: text });
        const framed = 1 + (one.length >= 128 ? 2 : 1) + one.length;
        assert.ok(framed <= id.length + REPLY_BYTES_PER_ITEM, `${word}: ${framed} bytes`);
    }
});

// package.test.js - the package as a user gets it: its bundled schema is the repository's, its
// type declarations name every export, it installs from a tarball, with --install-links and as a
// link from a folder without node_modules (a fresh clone), from npm's cache where it can (--prefer-offline); and
// its input checks: unknown options refused, model names checked before anything is sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as lanes from '../src/index.js';
import { Env } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.resolve(here, '..');

test('the bundled proto/lanes.proto is codec/lanes.proto', () => {
    const repo = path.resolve(pkg, '../../codec/lanes.proto');
    assert.ok(fs.existsSync(repo), 'codec/lanes.proto beside the package');
    assert.equal(
        fs.readFileSync(path.join(pkg, 'proto/lanes.proto'), 'utf8'),
        fs.readFileSync(repo, 'utf8'),
        'clients/node/proto/lanes.proto differs from codec/lanes.proto: cp codec/lanes.proto clients/node/proto/',
    );
    assert.equal(lanes.protoPath, path.join(pkg, 'proto/lanes.proto'));
});

test('index.d.ts declares every export of src/index.js', () => {
    const dts = fs.readFileSync(path.join(pkg, 'index.d.ts'), 'utf8');
    const declared = new Set([...dts.matchAll(/export declare (?:function|const|class) (\w+)/g)].map((m) => m[1]));
    const missing = Object.keys(lanes).filter((k) => !declared.has(k));
    assert.deepEqual(missing, []);
    const extra = [...declared].filter((k) => !(k in lanes));
    assert.deepEqual(extra, []);
});

test('model names are checked with the codec rules and words', () => {
    for (const m of ['llama', 'llama-3.1', 'meta.llama-3.1-8b', 'modèle']) lanes.modelCheck(m);
    const cases = {
        '': 'bad_model',
        'bad model': 'bad_model_name',
        'a*': 'bad_model_name',
        'a.>': 'bad_model_name',
        '.a': 'bad_model_name',
        'a.': 'bad_model_name',
        'a..b': 'bad_model_name',
        'a\tb': 'bad_model_name',
        ['x'.repeat(256)]: 'model_too_long',
    };
    for (const [m, word] of Object.entries(cases)) {
        assert.throws(() => lanes.modelCheck(m), (e) => e.code === word, JSON.stringify(m));
    }
    assert.throws(() => lanes.modelCheck(undefined), (e) => e.code === 'bad_model');
});

test('unknown options and item fields are refused', async () => {
    await assert.rejects(lanes.connect({ server: 'nats://127.0.0.1:1' }), /unknown option server/);
    assert.throws(() => lanes.workItem('m', { id: 'a', tokens: 1, reply_to: 'x' }), /unknown option reply_to/);
    const fake = { nc: {}, subject: () => 's', maxPayload: 1 << 20 };
    assert.throws(() => new lanes.Consumer(fake, { model: 'm', maxBatchSize: 1, maxBatchTokens: 1, max_batch_size: 2 }), /unknown option/);
    assert.throws(() => new lanes.Consumer(fake, { model: 'bad model', maxBatchSize: 1, maxBatchTokens: 1 }), (e) => e.code === 'bad_model_name');
    assert.throws(() => new lanes.Consumer(fake, { model: 'm', maxBatchSize: 1, maxBatchTokens: 0 }), (e) => e.code === 'zero_batch_tokens');
    assert.throws(() => new lanes.Consumer(fake, { model: 'm', maxBatchSize: 1, maxBatchTokens: 1, tokenNs: -1 }), TypeError);
});

test('items carry prefix_tokens and max_wait_ms only when set', () => {
    const w = lanes.workItem('m', { id: 'a', tokens: 5, prefixTokens: 3, maxWaitMs: 250 }, 1n);
    const d = lanes.decode('WorkItem', lanes.encode('WorkItem', w));
    assert.equal(d.prefix_tokens, 3);
    assert.equal(d.max_wait_ms, 250);
    const bare = lanes.encode('WorkItem', lanes.workItem('m', { id: 'a', tokens: 5 }, 1n));
    const bare2 = lanes.encode('WorkItem', lanes.workItem('m', { id: 'a', tokens: 5, prefixTokens: 0 }, 1n));
    assert.deepEqual(Buffer.from(bare), Buffer.from(bare2));
});

function npm(args, cwd) {
    return execFileSync('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, npm_config_update_notifier: 'false' },
    });
}

function project(dir) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', type: 'module' }));
    return dir;
}

function importWorks(dir) {
    const out = execFileSync(
        process.execPath,
        [
            '--input-type=module',
            '-e',
            "const m = await import('lanesched-client'); const fs = await import('node:fs');" +
                "console.log(JSON.stringify({ sig: m.shapeFormat(m.shapeSign(['You are a helpful assistant.'])), proto: fs.existsSync(m.protoPath), where: m.protoPath }))",
        ],
        { cwd: dir, encoding: 'utf8' },
    );
    const r = JSON.parse(out);
    assert.equal(r.sig, '0x91f47f2f45b64efd');
    assert.ok(r.proto, `the schema at ${r.where}`);
    return r.where;
}

test('installs as a tarball, with --install-links and linked from a fresh clone', { timeout: 120000 }, () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lanes-npm-'));
    try {
        // npm pack: the tarball holds the schema and the declarations, not the tests
        const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', tmp], pkg));
        const files = packed[0].files.map((f) => f.path);
        for (const f of ['proto/lanes.proto', 'index.d.ts', 'src/index.js', 'package.json']) assert.ok(files.includes(f), f);
        assert.ok(!files.some((f) => f.startsWith('test/')), 'no tests in the tarball');
        const tarball = path.join(tmp, packed[0].filename);
        const a = project(path.join(tmp, 'tarball'));
        npm(['install', tarball], a);
        assert.ok(importWorks(a).startsWith(a));

        const b = project(path.join(tmp, 'links'));
        npm(['install', '--install-links', pkg], b);
        assert.ok(importWorks(b).startsWith(b));

        // a fresh clone: the package's files without node_modules, linked into a project
        const clone = path.join(tmp, 'clone', 'clients', 'node');
        fs.mkdirSync(clone, { recursive: true });
        for (const f of ['package.json', 'package-lock.json', 'index.d.ts', 'README.md']) fs.copyFileSync(path.join(pkg, f), path.join(clone, f));
        for (const d of ['src', 'proto', 'scripts']) fs.cpSync(path.join(pkg, d), path.join(clone, d), { recursive: true });
        const c = project(path.join(tmp, 'linked'));
        npm(['install', clone], c);
        assert.ok(fs.lstatSync(path.join(c, 'node_modules', 'lanesched-client')).isSymbolicLink(), 'installed as a link');
        assert.ok(importWorks(c).startsWith(clone));
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
});

test('declared cost and cache reach the daemon; inboxPrefix carries the batches', { timeout: 60000 }, async () => {
    const env = await Env.start();
    try {
        const client = await lanes.connect({ servers: env.url, prefix: env.prefix, inboxPrefix: '_INBOX_carol' });
        assert.match(client.newInbox(), /^_INBOX_carol\./);
        const c = await client.consumer({
            model: 'costly',
            maxBatchSize: 4,
            maxBatchTokens: 512,
            batchFixedUs: 2500,
            tokenNs: 40,
            cacheShapes: 3,
        });
        assert.match(c.inbox, /^_INBOX_carol\./);
        const s = (await client.stats()).consumers.find((x) => x.id === c.id);
        assert.deepEqual([s.cost_estimated, s.cost_fixed_us, s.cost_token_ns, s.cache_shapes], [false, 2500, 40, 3]);
        const t0 = Date.now();
        await assert.rejects(client.submit('bad model', [{ id: 'a', tokens: 1 }]), (e) => e.code === 'bad_model_name');
        await assert.rejects(client.submit('', [{ id: 'a', tokens: 1 }]), (e) => e.code === 'bad_model');
        assert.ok(Date.now() - t0 < 1000, 'refused before sending');
        const r = await client.submit('costly', [{ id: 'p1', tokens: 7, prefixTokens: 3, maxWaitMs: 250 }]);
        assert.equal(r.accepted, 1);
        const b = await c.next({ timeoutMs: 5000 });
        assert.equal(b.items[0].tokens, 7);
        assert.equal((await b.ack()).code, '');
        await client.close();
    } finally {
        await env.stop();
    }
});

// harness.js - a real nats-server and the real lanesched daemon for the tests, on free loopback
// ports, with their data and logs in a temporary directory that stop() removes.
//
// Invariants:
//   1. Every child is killed when the test process exits, however it exits (a failed assertion,
//      an exception, a timeout): nothing outlives the run.
//   2. The daemon counts as started once it answers P.stats; as stopped once its process exited.
//      A SIGTERM stop requires exit status 0 (a clean shutdown, and no leak report under ASan).
//   3. Binaries: LANESCHED_BIN (CTest passes the built daemon), else ../../build/bin/lanesched;
//      NATS_SERVER, else nats-server on PATH.
//
// Rejected: one server for every test file (files may run in parallel, and a test that restarts
// the daemon would disturb the others).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect as natsConnect } from 'nats';

const here = path.dirname(fileURLToPath(import.meta.url));
const alive = new Set();
process.on('exit', () => {
    for (const c of alive) c.kill('SIGKILL');
});

export function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls cond() every 20 ms until it is truthy (returns it) or ms pass (throws with what). */
export async function until(cond, ms, what) {
    const end = Date.now() + ms;
    for (;;) {
        const v = await cond();
        if (v) return v;
        if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
        await sleep(20);
    }
}

function daemonBin() {
    const p = process.env.LANESCHED_BIN ?? path.resolve(here, '../../../build/bin/lanesched');
    if (!fs.existsSync(p)) {
        throw new Error(`lanesched binary not found at ${p}: build it, or set LANESCHED_BIN`);
    }
    return p;
}

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

function probe(port) {
    return new Promise((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('connect', () => {
            s.destroy();
            resolve(true);
        });
        s.once('error', () => resolve(false));
    });
}

class Child {
    constructor(argv, logPath) {
        const fd = fs.openSync(logPath, 'a');
        this.proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd] });
        fs.closeSync(fd);
        this.status = null;
        this.exited = new Promise((resolve) => {
            this.proc.once('exit', (code, signal) => {
                alive.delete(this.proc);
                this.status = { code, signal };
                resolve(this.status);
            });
            this.proc.once('error', (err) => {
                alive.delete(this.proc);
                this.status = { code: -1, signal: null, err };
                resolve(this.status);
            });
        });
        alive.add(this.proc);
    }

    /** Sends signal, waits up to graceMs, then SIGKILL; resolves to { code, signal }. */
    async stop(signal = 'SIGTERM', graceMs = 10000) {
        if (this.status) return this.status;
        this.proc.kill(signal);
        const t = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
        const st = await this.exited;
        clearTimeout(t);
        return st;
    }
}

export class Env {
    /** Starts nats-server (opts.natsConfig: extra config text, e.g. "max_payload: 65536") and,
     *  unless opts.daemon is false, lanesched with opts.flags. */
    static async start(opts = {}) {
        const env = new Env(opts);
        try {
            await env.natsStart();
            if (opts.daemon !== false) await env.daemonStart();
        } catch (err) {
            await env.stop({ keep: true });
            throw err;
        }
        return env;
    }

    constructor(opts) {
        this.opts = opts;
        this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lanes-node-'));
        this.dataDir = path.join(this.dir, 'data');
        this.prefix = opts.prefix ?? 'lanes';
        this.daemon = null;
        this.daemonLog = path.join(this.dir, 'lanesched.log');
        this.nats = null;
        this.ncs = [];
    }

    get url() {
        return `nats://127.0.0.1:${this.port}`;
    }

    async natsStart() {
        const bin = process.env.NATS_SERVER ?? 'nats-server';
        let conf = null;
        if (this.opts.natsConfig) {
            conf = path.join(this.dir, 'nats.conf');
            fs.writeFileSync(conf, `${this.opts.natsConfig}\n`);
        }
        for (let attempt = 0; attempt < 5; attempt++) {
            const port = await freePort();
            const argv = [bin, '-a', '127.0.0.1', '-p', String(port), ...(conf ? ['-c', conf] : [])];
            const child = new Child(argv, path.join(this.dir, 'nats.log'));
            const end = Date.now() + 5000;
            while (!child.status && Date.now() < end && !(await probe(port))) await sleep(20);
            if (!child.status && (await probe(port))) {
                this.nats = child;
                this.port = port;
                return;
            }
            await child.stop('SIGKILL'); // the port was taken meanwhile
        }
        throw new Error(`nats-server did not start: ${this.tail(path.join(this.dir, 'nats.log'))}`);
    }

    /** A NATS connection of the test's own, closed by stop(). */
    async connection() {
        const nc = await natsConnect({ servers: this.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
        this.ncs.push(nc);
        return nc;
    }

    async daemonStart(flags = this.opts.flags ?? []) {
        if (this.daemon) throw new Error('the daemon is already running');
        const argv = [
            daemonBin(),
            '--server',
            this.url,
            '--prefix',
            this.prefix,
            '--data-dir',
            this.dataDir,
            ...flags,
        ];
        this.daemon = new Child(argv, this.daemonLog);
        const nc = this.probeNc ?? (this.probeNc = await this.connection());
        const end = Date.now() + 20000;
        for (;;) {
            if (this.daemon.status) {
                throw new Error(
                    `lanesched exited at start (${JSON.stringify(this.daemon.status)}): ${this.tail(this.daemonLog)}`,
                );
            }
            try {
                await nc.request(`${this.prefix}.stats`, new Uint8Array(0), { timeout: 500 });
                return;
            } catch {
                if (Date.now() > end)
                    throw new Error(`lanesched not answering: ${this.tail(this.daemonLog)}`);
                await sleep(50);
            }
        }
    }

    /** Stops the daemon: SIGTERM must exit 0 (invariant 2); SIGKILL is a crash. */
    async daemonStop(signal = 'SIGTERM') {
        const d = this.daemon;
        this.daemon = null;
        const st = await d.stop(signal);
        if (signal === 'SIGTERM' && st.code !== 0) {
            throw new Error(
                `lanesched exited with ${JSON.stringify(st)} at SIGTERM: ${this.tail(this.daemonLog)}`,
            );
        }
        return st;
    }

    tail(file, lines = 40) {
        try {
            return `\n${fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n')}`;
        } catch {
            return '(no log)';
        }
    }

    /** Stops everything and removes the directory (kept, and named, when opts.keep, when the
     *  daemon did not stop cleanly, or with LANES_TEST_KEEP set: its logs are there). */
    async stop(opts = {}) {
        for (const nc of this.ncs.splice(0)) if (!nc.isClosed()) await nc.close();
        let err = null;
        try {
            if (this.daemon) await this.daemonStop('SIGTERM');
        } catch (e) {
            err = e;
        }
        if (this.nats) await this.nats.stop('SIGTERM');
        if (opts.keep || err || process.env.LANES_TEST_KEEP)
            console.error(`lanes test directory kept: ${this.dir}`);
        else fs.rmSync(this.dir, { recursive: true, force: true });
        if (err) throw err;
    }
}

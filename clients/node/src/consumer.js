// consumer.js - a lanesched consumer: register, pulls kept outstanding on its own inbox,
// heartbeats, acks, bye, and registering again when the daemon no longer knows it
// (subjects.md, "Consumer life cycle" and the P.register / pull / ack / hb / bye sections).
//
// Invariants:
//   1. Each registration is a generation. Pull reply subjects are `${inbox}.${generation}.${seq}`
//      so every Batch is matched to the registration it was dispatched to; one of an earlier
//      generation is never handed out (it is returned to the daemon at once with a nak).
//   2. Outstanding pulls (one credit each) plus delivered batches not yet taken by next() stay
//      at `prefetch`: a batch can be dispatched the moment work arrives, and no more is taken
//      than the caller is ready for.
//   3. Every pull has a local deadline of expires_ms + max(heartbeat_ms, 1 s). A pull that ends
//      without any message (daemon restarted, its connection dropped, a lost message) makes the
//      consumer ask whether it is still known (an Ack for batch 0: unknown_batch = known);
//      unknown_consumer, or no answer, means register again.
//   4. unknown_consumer from a pull, an ack, or that probe registers again once per generation;
//      the old generation's pulls, queued batches and in-progress set are dropped (the daemon
//      returned those batches, or forgot them in a restart). Registering again retries with
//      backoff until it succeeds or the consumer is closed. A generation that ends within
//      REREGISTER_CALM_MS of its registration makes the next one wait first (200 ms, doubling to
//      5 s): a daemon that forgets every registration at once (a misconfiguration, a hostile
//      responder) gets a registration every few seconds, not a loop of them.
//   5. A heartbeat goes out every heartbeat_ms (the daemon's, unless overridden) listing the
//      in-progress set: every delivered batch not yet done (autoInProgress), so a batch being
//      worked on keeps its ack deadline however long the work takes.
//   6. After close() nothing is sent except the bye, and next() resolves to null.
//   7. A status message of the server on the inbox (no responders: the pull reached nobody) ends
//      its pull like a deadline does; it is never taken for a Batch (its empty body would decode
//      as an OK batch of no items, and two of them filled a prefetch of 2 for good).
//
// Rejected: one pull with `prefetch` credits (a single lost message would leave no pull out);
// re-registering on every pull timeout without asking first (in-flight batches would be given
// up on a lost message); heartbeats on a worker thread (the connection lives on this thread, and
// a worker whose work is asynchronous does not starve the event loop; see README).
import { EventEmitter } from 'node:events';
import { createInbox } from 'nats';
import { encode, decode, types, BatchStatus } from './codec.js';
import { LanesError, codeWord, errorFromReply, modelCheck, optionsCheck } from './errors.js';
import { requestRetry, sleep } from './retry.js';
import { Batch } from './batch.js';

/** The highest protocol version this package speaks (subjects.md, "Protocol version"). */
export const PROTOCOL_VERSION = 1;

/** Earlier registrations whose ack subject is kept to return their late batches: a batch
 *  arrives at most one pull deadline after its registration was given up. */
const OLD_GENERATIONS_KEPT = 4;

/** A generation that lived this long ends without delaying the next (invariant 4). */
const REREGISTER_CALM_MS = 10000;

const DEFAULTS = Object.freeze({
    maxInputTokens: 0,
    name: '',
    prefetch: 2, // subjects.md's example: pull 2, pull again when one arrives
    pullExpiresMs: 5000, // a short wait keeps the deadline of invariant 3 short
    autoInProgress: true,
    heartbeatMs: undefined, // undefined: Registered.heartbeat_ms; 0: send none
    ackTimeoutMs: 2000,
    ackRetryForMs: 10000,
    registerTimeoutMs: 2000,
    registerRetryForMs: 30000, // for the first registration; later ones retry until close()
    errorPauseMs: 1000, // after an ERROR batch other than unknown_consumer (e.g. publish_failed)
    // The worker's declared cost and cache (Register fields 6-8; subjects.md,
    // P.register.<model>): 0 = not sent (the daemon estimates the cost from batch times; the
    // cache holds one shape).
    batchFixedUs: 0,
    tokenNs: 0,
    cacheShapes: 0,
});

/** Every option client.consumer() takes; any other is refused. */
export const CONSUMER_OPTIONS = Object.freeze(['model', 'maxBatchSize', 'maxBatchTokens', ...Object.keys(DEFAULTS)]);

const U32 = 0xffffffff;

function u32(name, v) {
    if (!Number.isInteger(v) || v < 0 || v > U32) throw new TypeError(`consumer: ${name} must be an integer in 0..${U32}`);
    return v;
}

/** Registered's field 10 is the daemon's protocol version (subjects.md); read by number, so a
 *  schema that does not have it yet reads as version 1. */
const PROTOCOL_FIELD = types.Registered.fieldsById[10]?.name;

export function registeredOf(r) {
    const v = PROTOCOL_FIELD ? r[PROTOCOL_FIELD] : 0;
    return {
        consumerId: r.consumer_id,
        pullSubject: r.pull_subject,
        ackSubject: r.ack_subject,
        heartbeatSubject: r.heartbeat_subject,
        byeSubject: r.bye_subject,
        heartbeatMs: r.heartbeat_ms,
        deadAfterMs: r.dead_after_ms,
        ackWaitMs: r.ack_wait_ms,
        protocolVersion: v || 1, // a daemon that does not send it speaks version 1
    };
}

/**
 * Events: 'registered' (info: the Registered fields, camelCase), 'warning' (a LanesError or a
 * NATS error the consumer rode out: a refused pull, a failed re-registration attempt, ...).
 */
export class Consumer extends EventEmitter {
    constructor(client, opts = {}) {
        super();
        optionsCheck('consumer', opts, CONSUMER_OPTIONS);
        modelCheck(opts.model);
        if (!opts.maxBatchSize) throw new LanesError('zero_batch_size', 'maxBatchSize must be greater than zero');
        if (!opts.maxBatchTokens) throw new LanesError('zero_batch_tokens', 'maxBatchTokens must be greater than zero');
        for (const k of ['maxBatchSize', 'maxBatchTokens', 'maxInputTokens', 'batchFixedUs', 'tokenNs', 'cacheShapes']) {
            if (opts[k] !== undefined) u32(k, opts[k]);
        }
        this.client = client;
        this.nc = client.nc;
        this.opts = { ...DEFAULTS, ...opts };
        this.info = null;
        this.generation = 0;
        this.state = 'new';
        this.inbox = createInbox(client.inboxPrefix);
        this.seq = 0;
        this.pulls = new Map(); // seq -> { generation, timer }
        this.queue = []; // delivered, not yet taken
        this.waiters = []; // next() calls waiting
        this.inProgress = new Map(); // batchId -> Batch (this generation's)
        this.oldAckSubjects = new Map(); // generation -> ack subject, for returning stale batches
        this.reregistering = null;
        this.registeredAt = 0; // of the current generation (Date.now())
        this.reregWaitMs = 0; // before the next registration again (invariant 4)
        this.probing = false;
        this.pause = null;
        this.hbTimer = null;
        this.closed = new Promise((resolve) => {
            this.resolveClosed = resolve;
        });
    }

    /** The current consumer id (changes when the consumer registers again). */
    get id() {
        return this.info?.consumerId ?? null;
    }

    warn(err) {
        this.emit('warning', err);
    }

    /** A publish from a timer or a callback: a failure (the connection closed under us) is a
     *  warning, never an exception nobody can catch. */
    send(subject, data, opts) {
        try {
            this.nc.publish(subject, data, opts);
        } catch (err) {
            this.warn(err);
        }
    }

    // ---- registration -------------------------------------------------------------------------

    async register(retryForMs) {
        const o = this.opts;
        const bytes = encode('Register', {
            model: o.model,
            max_batch_size: o.maxBatchSize,
            max_batch_tokens: o.maxBatchTokens,
            max_input_tokens: o.maxInputTokens,
            name: o.name,
            batch_fixed_us: o.batchFixedUs,
            token_ns: o.tokenNs,
            cache_shapes: o.cacheShapes,
        });
        const data = await requestRetry(this.nc, this.client.subject('register', o.model), bytes, {
            timeoutMs: o.registerTimeoutMs,
            retryForMs,
            stopped: () => this.state === 'closed',
        });
        const r = decode('Registered', data);
        if (r.error) throw errorFromReply(r.error);
        const info = registeredOf(r);
        if (this.state === 'closed') {
            this.send(info.byeSubject, new Uint8Array(0)); // created while closing: leave
            return;
        }
        if (this.info) this.oldAckSubjects.set(this.generation, this.info.ackSubject);
        this.oldAckSubjects.delete(this.generation - OLD_GENERATIONS_KEPT);
        this.generation++;
        this.info = info;
        this.registeredAt = Date.now();
        if (info.protocolVersion > PROTOCOL_VERSION) {
            this.warn(
                new LanesError(
                    'protocol_version',
                    `the daemon speaks version ${info.protocolVersion}, this client ${PROTOCOL_VERSION}`,
                ),
            );
        }
        this.heartbeatStart();
        this.emit('registered', info);
    }

    /** Registers and starts pulling; throws LanesError (the daemon's word, or timeout). */
    async open() {
        this.sub = this.nc.subscribe(`${this.inbox}.>`, {
            callback: (err, msg) => this.onMessage(err, msg),
        });
        try {
            await this.register(this.opts.registerRetryForMs);
        } catch (err) {
            this.state = 'closed';
            this.sub.unsubscribe();
            this.resolveClosed();
            throw err;
        }
        this.state = 'running';
        this.topUp();
    }

    /** Invariant 4: registers again, once for generation gen. */
    reregister(gen, why) {
        if (gen !== this.generation || this.reregistering || this.state !== 'running') return;
        this.warn(why);
        this.generationDrop();
        const calm = Date.now() - this.registeredAt >= REREGISTER_CALM_MS ? 0 : this.reregWaitMs;
        this.reregWaitMs = Math.min(Math.max(2 * calm, 200), 5000);
        this.reregistering = (async () => {
            if (calm > 0) await new Promise((resolve) => setTimeout(resolve, calm).unref());
            let wait = 200;
            while (this.state === 'running') {
                try {
                    await this.register(60000);
                    break;
                } catch (err) {
                    if (this.state !== 'running') break;
                    this.warn(err);
                    await sleep(wait);
                    wait = Math.min(wait * 2, 5000);
                }
            }
            this.reregistering = null;
            this.topUp();
        })();
    }

    generationDrop() {
        clearInterval(this.hbTimer);
        this.hbTimer = null;
        for (const p of this.pulls.values()) clearTimeout(p.timer);
        this.pulls.clear();
        this.queue = [];
        this.inProgress.clear();
    }

    // ---- heartbeats ---------------------------------------------------------------------------

    heartbeatStart() {
        clearInterval(this.hbTimer);
        this.hbTimer = null;
        const ms = this.opts.heartbeatMs ?? (this.info.heartbeatMs || 2000);
        if (ms > 0) this.hbTimer = setInterval(() => this.heartbeat(), ms);
    }

    heartbeat() {
        if (this.state !== 'running' || this.reregistering || this.nc.isClosed()) return;
        const ids = [...this.inProgress.keys()];
        this.send(this.info.heartbeatSubject, encode('Heartbeat', { in_progress: ids }));
    }

    // ---- pulls --------------------------------------------------------------------------------

    topUp() {
        if (this.state !== 'running' || this.reregistering || this.pause || this.nc.isClosed()) return;
        while (this.pulls.size + this.queue.length < this.opts.prefetch) this.pull();
    }

    pull() {
        const seq = ++this.seq;
        const gen = this.generation;
        const expires = this.opts.pullExpiresMs;
        const margin = Math.max(this.info.heartbeatMs || 0, 1000);
        const timer = setTimeout(() => this.pullLost(seq, gen), expires + margin);
        this.pulls.set(seq, { generation: gen, timer });
        this.send(this.info.pullSubject, encode('Pull', { max_batches: 1, expires_ms: expires }), {
            reply: `${this.inbox}.${gen}.${seq}`,
        });
    }

    pullLost(seq, gen) {
        this.pulls.delete(seq);
        if (gen === this.generation) this.probe(gen);
    }

    /** Invariant 3: is this consumer id still known? */
    async probe(gen) {
        if (this.probing || this.state !== 'running') return;
        this.probing = true;
        let code;
        try {
            const data = await requestRetry(this.nc, this.info.ackSubject, encode('Ack', {}), {
                timeoutMs: this.opts.ackTimeoutMs,
                retryForMs: this.opts.ackTimeoutMs,
            });
            code = codeWord(decode('AckReply', data).error);
        } catch (err) {
            code = err.code === 'timeout' || err.code === 'no_responders' ? err.code : 'error';
            if (code === 'error') this.warn(err);
        } finally {
            this.probing = false;
        }
        if (code === 'unknown_consumer' || code === 'timeout' || code === 'no_responders') {
            this.reregister(gen, new LanesError(code, 'a pull ended without any reply; registering again'));
        } else {
            this.topUp();
        }
    }

    onMessage(err, msg) {
        if (err) {
            this.warn(err);
            return;
        }
        const tokens = msg.subject.slice(this.inbox.length + 1).split('.');
        const gen = Number(tokens[0]);
        const seq = Number(tokens[1]);
        const pull = this.pulls.get(seq);
        if (pull) {
            clearTimeout(pull.timer);
            this.pulls.delete(seq);
        }
        if (msg.headers?.hasError) {
            // Invariant 7: the server's own status (503: nobody served the pull subject when the
            // pull got there, the daemon down or restarting): the pull is lost, not answered.
            if (gen === this.generation && !this.reregistering) this.probe(gen);
            return;
        }
        let b;
        try {
            b = decode('Batch', msg.data);
        } catch (e) {
            this.warn(new LanesError('malformed', 'a Batch did not decode', { cause: e }));
            this.topUp();
            return;
        }
        if (b.status === BatchStatus.BATCH_STATUS_OK && b.items.length === 0) {
            this.warn(new LanesError('malformed', 'a Batch with status OK and no items'));
            this.topUp();
            return;
        }
        if (gen !== this.generation || this.state !== 'running' || this.reregistering) {
            this.staleReturn(b, gen);
            return;
        }
        if (b.status === BatchStatus.BATCH_STATUS_OK) {
            this.deliver(new Batch(this, b, gen, this.info.ackSubject));
        } else if (b.status === BatchStatus.BATCH_STATUS_ERROR) {
            const code = codeWord(b.error);
            if (code === 'unknown_consumer') {
                this.reregister(gen, errorFromReply(b.error));
                return;
            }
            this.warn(errorFromReply(b.error));
            this.pause = setTimeout(() => {
                this.pause = null;
                this.topUp();
            }, this.opts.errorPauseMs);
        } else if (b.status !== BatchStatus.BATCH_STATUS_EXPIRED) {
            this.warn(new LanesError('bad_reply', `a Batch with unknown status ${b.status}`));
        }
        this.topUp();
    }

    /** Invariant 1: a batch for an earlier registration (or after close) goes back at once. */
    staleReturn(b, gen) {
        if (b.status !== BatchStatus.BATCH_STATUS_OK || b.items.length === 0) return;
        const subject = gen === this.generation ? this.info.ackSubject : this.oldAckSubjects.get(gen);
        if (!subject || this.nc.isClosed()) return;
        this.send(subject, encode('Ack', { batch_id: b.batch_id, nak: b.items.map((_, i) => i) }));
    }

    deliver(batch) {
        if (this.opts.autoInProgress) this.inProgress.set(batch.batchId, batch);
        const w = this.waiters.shift();
        if (w) {
            clearTimeout(w.timer);
            w.resolve(batch);
        } else {
            this.queue.push(batch);
        }
    }

    /** The next batch; null after close(), or when opts.timeoutMs passes first. */
    next(opts = {}) {
        optionsCheck('next', opts, ['timeoutMs']);
        if (this.queue.length > 0) {
            const b = this.queue.shift();
            this.topUp();
            return Promise.resolve(b);
        }
        if (this.state === 'closed') return Promise.resolve(null);
        return new Promise((resolve) => {
            const w = { resolve, timer: null };
            if (opts.timeoutMs !== undefined) {
                w.timer = setTimeout(() => {
                    this.waiters = this.waiters.filter((x) => x !== w);
                    resolve(null);
                }, opts.timeoutMs);
            }
            this.waiters.push(w);
        });
    }

    async *[Symbol.asyncIterator]() {
        for (;;) {
            const b = await this.next();
            if (b === null) return;
            yield b;
        }
    }

    // ---- acks ---------------------------------------------------------------------------------

    /** Stops listing batch in heartbeats (see Batch.release). */
    release(batch) {
        if (this.inProgress.get(batch.batchId) === batch) this.inProgress.delete(batch.batchId);
    }

    /**
     * Sends an Ack for batch and resolves to { acked, returned, unknown, error, code } (code: the
     * error's code word, '' when none). Retries the same Ack while no reply comes, then throws
     * LanesError 'timeout' / 'no_responders'. opts: { timeoutMs, retryForMs }.
     */
    async ackSend(batch, fields, opts = {}) {
        optionsCheck('ack', opts, ['timeoutMs', 'retryForMs']);
        const ack = { batch_id: batch.batchId, ...fields };
        const data = await requestRetry(this.nc, batch.ackSubject, encode('Ack', ack), {
            timeoutMs: opts.timeoutMs ?? this.opts.ackTimeoutMs,
            retryForMs: opts.retryForMs ?? this.opts.ackRetryForMs,
        });
        const r = decode('AckReply', data);
        const code = codeWord(r.error);
        batch.note(ack, code);
        if (batch.done && this.inProgress.get(batch.batchId) === batch) this.inProgress.delete(batch.batchId);
        if (code === 'unknown_consumer') this.reregister(batch.generation, errorFromReply(r.error));
        return { acked: r.acked, returned: r.returned, unknown: r.unknown, error: r.error, code };
    }

    // ---- leaving ------------------------------------------------------------------------------

    /**
     * Stops pulling and heartbeating. With bye (the default) the daemon returns this consumer's
     * unfinished batches at once; without, they return after dead_after_ms (as after a crash).
     * Resolves to the bye's AckReply ({ code, error }) or null (no bye, or no reply).
     */
    async close(opts = {}) {
        optionsCheck('close', opts, ['bye', 'timeoutMs']);
        if (this.state === 'closed') return this.closeResult ?? null;
        const bye = opts.bye ?? true;
        const wasRunning = this.info !== null;
        this.state = 'closed';
        this.generationDrop();
        clearTimeout(this.pause);
        this.closeResult = (async () => {
            let reply = null;
            if (bye && wasRunning && !this.nc.isClosed()) {
                try {
                    const t = opts.timeoutMs ?? this.opts.ackTimeoutMs;
                    const data = await requestRetry(this.nc, this.info.byeSubject, new Uint8Array(0), {
                        timeoutMs: t,
                        retryForMs: t,
                    });
                    const r = decode('AckReply', data);
                    reply = { error: r.error, code: codeWord(r.error) };
                } catch (err) {
                    this.warn(err);
                }
            }
            if (!this.nc.isClosed()) this.sub.unsubscribe();
            for (const w of this.waiters.splice(0)) {
                clearTimeout(w.timer);
                w.resolve(null);
            }
            this.resolveClosed();
            return reply;
        })();
        return this.closeResult;
    }
}

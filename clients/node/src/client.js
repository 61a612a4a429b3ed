// client.js - a NATS connection used as a lanesched client: subjects under the prefix, the
// producer's calls, consumers, P.stats.
//
// Invariants:
//   1. Every subject is `${prefix}.${verb}[.${rest}]` (subjects.md, "Prefix"); nothing else
//      builds one.
//   2. A connection the caller passed in is borrowed: close() leaves it open. One this package
//      opened is drained at close(), after every consumer it made is closed.
//   3. The client never adds NATS headers (subjects.md: messages carry none).
//
// Rejected: a connection per consumer (NATS multiplexes; one per process is the norm).
import { connect as natsConnect, createInbox } from 'nats';
import { submitRequest, submitSend } from './submit.js';
import { Consumer } from './consumer.js';
import { LanesError, optionsCheck } from './errors.js';
import { requestRetry } from './retry.js';

const PREFIX_DEFAULT = 'lanes';
const SERVER_DEFAULT = 'nats://127.0.0.1:4222';

export const CONNECT_OPTIONS = Object.freeze(['servers', 'prefix', 'inboxPrefix', 'name', 'nats', 'nc']);

/**
 * Opens a client. opts: { servers (string or array; default env LANESCHED_SERVER or
 * nats://127.0.0.1:4222), prefix (default env LANESCHED_PREFIX or "lanes"), inboxPrefix (replies
 * and batches arrive under it, e.g. "_INBOX.alice"; default nats.js's "_INBOX"), name, nats (more
 * options for the nats package's connect: user, pass, token, authenticator, tls, ...), nc (an
 * open connection to use instead, borrowed) }. An unknown option is a TypeError.
 */
export async function connect(opts = {}) {
    optionsCheck('connect', opts, CONNECT_OPTIONS);
    const prefix = opts.prefix ?? process.env.LANESCHED_PREFIX ?? PREFIX_DEFAULT;
    if (opts.nc) return new LanesClient(opts.nc, prefix, false, opts.nc.options?.inboxPrefix);
    const servers = opts.servers ?? process.env.LANESCHED_SERVER ?? SERVER_DEFAULT;
    const inboxPrefix = opts.inboxPrefix ?? opts.nats?.inboxPrefix;
    const nc = await natsConnect({
        servers: typeof servers === 'string' ? servers.split(',') : servers,
        name: opts.name ?? 'lanesched-node',
        maxReconnectAttempts: -1, // a long-lived worker rides out server restarts
        ...opts.nats,
        ...(inboxPrefix ? { inboxPrefix } : {}),
    });
    return new LanesClient(nc, prefix, true, inboxPrefix);
}

export class LanesClient {
    constructor(nc, prefix, owned, inboxPrefix) {
        this.nc = nc;
        this.prefix = prefix;
        this.owned = owned;
        this.inboxPrefix = inboxPrefix || undefined;
        this.consumers = new Set();
    }

    /** A fresh subject under the inbox prefix (for an item's replyTo, say). */
    newInbox() {
        return createInbox(this.inboxPrefix);
    }

    /** `${prefix}.${parts joined by "."}` (invariant 1). */
    subject(...parts) {
        return [this.prefix, ...parts].join('.');
    }

    /** The server's max_payload: the largest message NATS takes. */
    get maxPayload() {
        return this.nc.info?.max_payload ?? 1048576;
    }

    /** Producer with replies, retries and dedupe-safe ids: see submit.js and README. */
    submit(model, items, opts) {
        return submitRequest(this, model, items, opts);
    }

    /** Fire-and-forget submit: at most once, no verdicts. */
    send(model, items, opts) {
        return submitSend(this, model, items, opts);
    }

    /** Registers a consumer and starts it (pulls, heartbeats): see consumer.js and README. */
    async consumer(opts) {
        const c = new Consumer(this, opts);
        await c.open();
        this.consumers.add(c);
        c.closed.then(() => this.consumers.delete(c));
        return c;
    }

    /** P.stats: the daemon's figures as a parsed JSON object (the first instance to answer). */
    async stats(opts = {}) {
        optionsCheck('stats', opts, ['timeoutMs', 'retryForMs']);
        const data = await requestRetry(this.nc, this.subject('stats'), new Uint8Array(0), {
            retryForMs: 0,
            ...opts,
        });
        try {
            return JSON.parse(Buffer.from(data).toString('utf8'));
        } catch (err) {
            throw new LanesError('bad_reply', 'P.stats did not answer JSON', { cause: err });
        }
    }

    /** Closes every consumer (with bye unless opts.bye is false), then the connection if owned. */
    async close(opts = {}) {
        await Promise.all([...this.consumers].map((c) => c.close(opts)));
        if (this.owned && !this.nc.isClosed()) await this.nc.drain();
    }
}

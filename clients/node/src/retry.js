// retry.js - a NATS request sent again, with the same bytes, until a reply comes or a time limit
// runs out (subjects.md, "Delivery guarantees": a retry MUST carry the same ids).
//
// Invariants:
//   1. Every attempt publishes exactly the bytes it was given: a retry never re-encodes, so item
//      ids, positions and every other field are those of the first attempt.
//   2. Only "no reply yet" is retried: a timeout or the server's "no responders" status (no
//      lanesched subscribed, e.g. while it restarts). Any reply, whatever it says, ends the loop.
//   3. The wait between attempts doubles from backoffMs up to maxBackoffMs, with up to 25%
//      random jitter so that producers that failed together do not retry together.
//
// Rejected: retrying on a reply that carries an error (the daemon's verdicts are answers, some
// permanent); an unbounded loop (producers SHOULD stop well inside the dedupe window).
import { ErrorCode } from 'nats';
import { LanesError } from './errors.js';

/** Defaults shared by the producer and the consumer; every one can be overridden per call. */
export const RETRY_DEFAULTS = Object.freeze({
    timeoutMs: 2000, // one attempt's wait: subjects.md's example figure
    retryForMs: 60000, // half the default 120 s dedupe window: the retry is still deduplicated
    backoffMs: 100,
    maxBackoffMs: 2000,
});

export function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function retriable(err) {
    return err?.code === ErrorCode.Timeout || err?.code === ErrorCode.NoResponders;
}

/**
 * Sends bytes on subject as a request until a reply arrives; returns the reply's data.
 * Throws LanesError 'timeout' or 'no_responders' once opts.retryForMs has passed with no reply,
 * 'closed' if opts.stopped() turns true, and NATS's own error for anything else (a closed
 * connection, a message over max_payload).
 */
export async function requestRetry(nc, subject, bytes, opts = {}) {
    const o = { ...RETRY_DEFAULTS, ...opts };
    const end = Date.now() + o.retryForMs;
    let wait = o.backoffMs;
    for (let attempt = 1; ; attempt++) {
        let last;
        try {
            const msg = await nc.request(subject, bytes, { timeout: o.timeoutMs });
            return msg.data;
        } catch (err) {
            if (!retriable(err)) throw err;
            last = err;
        }
        const code = last.code === ErrorCode.NoResponders ? 'no_responders' : 'timeout';
        if (o.stopped?.()) throw new LanesError('closed', `${subject}: stopped after ${attempt} attempts`);
        const left = end - Date.now();
        if (left <= 0) {
            throw new LanesError(code, `${subject}: no reply after ${attempt} attempts`, { cause: last });
        }
        o.onRetry?.(attempt, code);
        await sleep(Math.min(left, wait * (1 + Math.random() / 4)));
        wait = Math.min(wait * 2, o.maxBackoffMs);
    }
}

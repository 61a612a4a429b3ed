// submit.js - the producer: WorkItems to P.submit.<model>, per-item verdicts back
// (subjects.md, "P.submit.<model>" and "Delivery guarantees / Submitting").
//
// Invariants:
//   1. Each Submit is encoded once and every retry sends those bytes (retry.js): the same ids,
//      so the daemon's dedupe window stores each item once and answers DUPLICATE for what a lost
//      attempt already stored.
//   2. A Submit is cut so that it and its reply both fit the server's max_payload: the message is
//      the sum of its encoded items, the reply is at most REPLY_BYTES_PER_ITEM + len(id) per item
//      (subjects.md, "How many items in one Submit"). Chunks go one after another, in order, and
//      results come back in the order of the items given.
//   3. An item that cannot fit in a NATS message even alone never reaches the daemon; it gets
//      the result the daemon gives an oversized payload (REJECTED, payload_too_large) without
//      being sent, and the other items go on.
//   4. A status this package does not know reads as rejected: nothing unknown is taken as stored.
//
// Rejected: sending chunks concurrently (one producer would fill the daemon's turns and lose
// the order of its own items); resubmitting store_full/store_error items by itself (the
// producer decides how long to wait; the result says which ones to send again, same ids).
import { shapeSign } from './shape.js';
import { encode, decode, ItemStatus } from './codec.js';
import { LanesError, errorFromReply, modelCheck, optionsCheck } from './errors.js';
import { requestRetry, RETRY_DEFAULTS } from './retry.js';

/** Every field of a producer's item; any other is refused. */
export const ITEM_FIELDS = Object.freeze([
    'id',
    'tokens',
    'components',
    'signature',
    'componentHashes',
    'payload',
    'replyTo',
    'createdUnixNs',
    'prefixTokens',
    'maxWaitMs',
]);
/** Every option of submit() and send(); any other is refused. */
export const SUBMIT_OPTIONS = Object.freeze([...Object.keys(RETRY_DEFAULTS), 'maxPayload', 'maxItems']);

/** Reply bytes reserved per item beside its id (subjects.md, "How many items in one Submit"): the
 *  longest ItemResult the daemon writes today (status, reason word, text, framing) is its id plus
 *  96 bytes; test/shape.test.js checks every word of codec/codec.h against the budget. */
export const REPLY_BYTES_PER_ITEM = 160;
/** Reply bytes reserved for the SubmitReply itself (its error field). */
const REPLY_BYTES_FIXED = 256;
/** Items per Submit at most, whatever their size: one Submit is handled in one daemon turn and
 *  answered after its flush, so a huge one delays every other producer's reply. */
export const SUBMIT_MAX_ITEMS = 1000;

const STATUS_NAMES = new Map([
    [ItemStatus.ITEM_STATUS_ACCEPTED, 'accepted'],
    [ItemStatus.ITEM_STATUS_DUPLICATE, 'duplicate'],
    [ItemStatus.ITEM_STATUS_REJECTED, 'rejected'],
]);

function varintLen(n) {
    let len = 1;
    while (n >= 0x80) {
        n = Math.floor(n / 128);
        len++;
    }
    return len;
}

function idBytes(id) {
    if (typeof id === 'string') return Buffer.from(id, 'utf8');
    if (id instanceof Uint8Array) return id;
    throw new TypeError('an item id is a string or a Uint8Array');
}

/** The wire WorkItem of a producer's item (see README for the fields). */
export function workItem(model, item, now = BigInt(Date.now()) * 1000000n) {
    optionsCheck('item', item, ITEM_FIELDS);
    const w = {
        id: idBytes(item.id),
        model,
        tokens: item.tokens,
        payload: item.payload ?? undefined,
        reply_to: item.replyTo ?? undefined,
        created_unix_ns: item.createdUnixNs ?? now,
        prefix_tokens: item.prefixTokens ?? undefined,
        max_wait_ms: item.maxWaitMs ?? undefined,
    };
    if (item.componentHashes !== undefined) w.component_hashes = item.componentHashes;
    if (item.signature !== undefined) w.signature = item.signature;
    else if (item.components !== undefined) w.signature = shapeSign(item.components);
    else if (item.componentHashes === undefined) w.signature = shapeSign([]);
    return w;
}

/** Splits encoded items into runs that fit (invariant 2); items too large alone are marked. */
export function plan(encoded, maxPayload, maxItems = SUBMIT_MAX_ITEMS) {
    const chunks = [];
    const oversized = [];
    let cur = null;
    encoded.forEach((e, i) => {
        const msg = 1 + varintLen(e.bytes.length) + e.bytes.length;
        const rep = REPLY_BYTES_PER_ITEM + e.idLen;
        if (msg > maxPayload || rep + REPLY_BYTES_FIXED > maxPayload) {
            oversized.push(i);
            return;
        }
        if (
            cur === null ||
            cur.idx.length >= maxItems ||
            cur.msg + msg > maxPayload ||
            cur.rep + rep > maxPayload
        ) {
            cur = { idx: [], msg: 0, rep: REPLY_BYTES_FIXED };
            chunks.push(cur);
        }
        cur.idx.push(i);
        cur.msg += msg;
        cur.rep += rep;
    });
    return { chunks: chunks.map((c) => c.idx), oversized };
}

function concat(encoded, idx) {
    // A Submit is its items, each as field 1 (wire type 2): tag 0x0a, length, bytes.
    const parts = [];
    for (const i of idx) {
        const b = encoded[i].bytes;
        const head = [0x0a];
        let n = b.length;
        while (n >= 0x80) {
            head.push((n & 0x7f) | 0x80);
            n = Math.floor(n / 128);
        }
        head.push(n);
        parts.push(Buffer.from(head), b);
    }
    return Buffer.concat(parts);
}

function result(item, r) {
    return {
        id: item.id,
        status: STATUS_NAMES.get(r.status) ?? 'rejected',
        reason: r.reason,
        error: r.error,
    };
}

function summary(results) {
    const count = (s) => results.filter((r) => r.status === s).length;
    return {
        results,
        accepted: count('accepted'),
        duplicate: count('duplicate'),
        rejected: count('rejected'),
    };
}

/**
 * Submits items for model with request/reply and retries (see README "Producer").
 * Returns { results, accepted, duplicate, rejected }, results[i] for items[i].
 * Throws LanesError: the daemon's word when it refused a whole message (e.g. malformed),
 * 'timeout' / 'no_responders' when a chunk got no reply within opts.retryForMs (earlier chunks
 * were submitted: resubmit everything, the same ids come back duplicate).
 */
export async function submitRequest(client, model, items, opts = {}) {
    optionsCheck('submit', opts, SUBMIT_OPTIONS);
    modelCheck(model);
    const now = BigInt(Date.now()) * 1000000n;
    const encoded = items.map((it) => {
        const w = workItem(model, it, now);
        return { bytes: encode('WorkItem', w), idLen: w.id.length };
    });
    const maxPayload = opts.maxPayload ?? client.maxPayload;
    const { chunks, oversized } = plan(encoded, maxPayload, opts.maxItems ?? SUBMIT_MAX_ITEMS);
    const results = new Array(items.length);
    for (const i of oversized) {
        results[i] = {
            id: items[i].id,
            status: 'rejected',
            reason: 'payload_too_large',
            error: `the item alone does not fit the server's max_payload (${maxPayload} bytes); not sent`,
        };
    }
    const subject = client.subject('submit', model);
    for (const idx of chunks) {
        const data = await requestRetry(client.nc, subject, concat(encoded, idx), opts);
        const reply = decode('SubmitReply', data);
        if (reply.error) throw errorFromReply(reply.error);
        if (reply.results.length !== idx.length) {
            throw new LanesError('bad_reply', `${reply.results.length} results for ${idx.length} items`);
        }
        idx.forEach((i, k) => {
            results[i] = result(items[i], reply.results[k]);
        });
    }
    return summary(results);
}

/** Fire-and-forget (at most once: subjects.md, "Submitting"): publishes, learns nothing back. */
export async function submitSend(client, model, items, opts = {}) {
    optionsCheck('send', opts, SUBMIT_OPTIONS);
    modelCheck(model);
    const now = BigInt(Date.now()) * 1000000n;
    const encoded = items.map((it) => {
        const w = workItem(model, it, now);
        return { bytes: encode('WorkItem', w), idLen: w.id.length };
    });
    const maxPayload = opts.maxPayload ?? client.maxPayload;
    const { chunks, oversized } = plan(encoded, maxPayload, opts.maxItems ?? SUBMIT_MAX_ITEMS);
    const subject = client.subject('submit', model);
    for (const idx of chunks) client.nc.publish(subject, concat(encoded, idx));
    await client.nc.flush();
    return { sent: items.length - oversized.length, oversized };
}

// batch.js - one delivered Batch and the ways to settle it (subjects.md, "P.ack.<consumer_id>").
//
// Invariants:
//   1. A Batch remembers the ack subject of the registration it came from: its acks go to the
//      consumer id that holds it, even after the consumer registered again (they then get
//      unknown_consumer, which is the truth: that batch was returned).
//   2. settled holds the positions this side knows to be settled (acked or returned); done turns
//      true once every position is, or once the daemon says the batch is no longer this
//      consumer's (unknown_batch, unknown_consumer). A done batch leaves the in-progress set.
//   3. Positions are 0-based indexes into items, as on the wire.
//
// Rejected: throwing on unknown_batch / unknown_position (they are answers the caller acts on,
// and subjects.md says not to retry them; only "no reply at all" throws).

/** The fields of a delivered BatchItem: id (Buffer), tokens, payload (Buffer), replyTo,
 *  deliveries (1 on the first delivery), prefixTokens (the producer's prefix_tokens, 0 = unknown). */
function itemOf(i) {
    return {
        id: i.id,
        tokens: i.tokens,
        payload: i.payload,
        replyTo: i.reply_to,
        deliveries: i.deliveries,
        prefixTokens: i.prefix_tokens,
    };
}

export class Batch {
    /** Made by the consumer only; msg is a decoded Batch with status OK. */
    constructor(consumer, msg, generation, ackSubject) {
        this.batchId = msg.batch_id; // BigInt
        this.model = msg.model;
        this.signature = msg.signature; // BigInt
        this.lane = msg.lane;
        this.padTo = msg.pad_to;
        this.items = msg.items.map(itemOf);
        this.settled = new Set();
        this.done = false;
        this.generation = generation;
        this.ackSubject = ackSubject;
        Object.defineProperty(this, 'consumer', { value: consumer, enumerable: false });
    }

    /** Every position 0 .. items.length - 1. */
    positions() {
        return this.items.map((_, i) => i);
    }

    /** Completes every unsettled position (Ack.all). Resolves to the AckReply (see README). */
    ack(opts) {
        return this.consumer.ackSend(this, { all: true }, opts);
    }

    /** Acks and naks by position: { ack: [..], nak: [..] }; naked items are delivered again. */
    settle({ ack = [], nak = [] } = {}, opts) {
        return this.consumer.ackSend(this, { ack, nak }, opts);
    }

    /** Returns positions (default: all) for redelivery. */
    nak(positions = this.positions(), opts) {
        return this.consumer.ackSend(this, { nak: positions }, opts);
    }

    /** Extends the ack deadline by ack_wait_ms (Ack.in_progress); settles nothing. */
    inProgress(opts) {
        return this.consumer.ackSend(this, { in_progress: true }, opts);
    }

    /** Stops extending this batch through heartbeats: unless settled, the daemon returns it
     *  ack_wait_ms after its dispatch or last extension (for work given up on). */
    release() {
        this.consumer.release(this);
    }

    /** Records an AckReply's effect on what this side knows (invariant 2). */
    note(ack, code) {
        if (code === 'unknown_batch' || code === 'unknown_consumer') {
            this.done = true;
            return;
        }
        if (code !== '' || ack.in_progress) return;
        const named = ack.all ? this.positions() : [...(ack.ack ?? []), ...(ack.nak ?? [])];
        for (const p of named) this.settled.add(p);
        if (this.settled.size >= this.items.length) this.done = true;
    }
}

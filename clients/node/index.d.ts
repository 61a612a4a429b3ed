// Type declarations of lanesched-client (src/index.js). 64-bit values (signatures, hashes, batch
// ids, created_unix_ns) are bigint: a number keeps only 53 bits.
import type { ConnectionOptions, NatsConnection } from 'nats';
import type { EventEmitter } from 'node:events';

export type Bytes = string | Uint8Array;

export interface ConnectOptions {
    /** NATS URLs: a string (comma list) or an array; default env LANESCHED_SERVER or nats://127.0.0.1:4222. */
    servers?: string | string[];
    /** Subject prefix; default env LANESCHED_PREFIX or "lanes". */
    prefix?: string;
    /** Replies and batches arrive under it (e.g. "_INBOX.alice"); default nats.js's "_INBOX". */
    inboxPrefix?: string;
    name?: string;
    /** More options for the nats package's connect: user, pass, token, authenticator, tls, ... */
    nats?: Partial<ConnectionOptions>;
    /** An open connection to use instead (borrowed: close() leaves it open). */
    nc?: NatsConnection;
}

export interface Item {
    /** 1 to 64 bytes, one per unit of work, the same on every retry. */
    id: Bytes;
    tokens: number;
    /** The prompt's cacheable parts, in order, hashed here into the signature. */
    components?: Bytes[];
    signature?: bigint;
    componentHashes?: bigint[];
    payload?: Bytes;
    /** Where the worker publishes the item's result. */
    replyTo?: string;
    /** Default: the time of the call. */
    createdUnixNs?: bigint;
    /** Tokens of the cacheable prefix the signature covers; 0 or absent: not sent. */
    prefixTokens?: number;
    /** This item's own wait budget in milliseconds; 0 or absent: not sent. */
    maxWaitMs?: number;
}

export interface SubmitOptions {
    timeoutMs?: number;
    retryForMs?: number;
    backoffMs?: number;
    maxBackoffMs?: number;
    maxPayload?: number;
    maxItems?: number;
}

export interface ItemResult {
    id: Bytes;
    status: 'accepted' | 'duplicate' | 'rejected';
    /** The code word: ok, duplicate, zero_tokens, queue_full, ... */
    reason: string;
    error: string;
}

export interface SubmitResult {
    results: ItemResult[];
    accepted: number;
    duplicate: number;
    rejected: number;
}

export interface ConsumerOptions {
    model: string;
    maxBatchSize: number;
    maxBatchTokens: number;
    /** 0 = unlimited. */
    maxInputTokens?: number;
    name?: string;
    /** The worker's fixed cost per batch, microseconds (0: the daemon estimates it). */
    batchFixedUs?: number;
    /** The worker's cost per padded token, nanoseconds. */
    tokenNs?: number;
    /** Prompt shapes its prefix cache keeps warm (0: 1). */
    cacheShapes?: number;
    prefetch?: number;
    pullExpiresMs?: number;
    autoInProgress?: boolean;
    /** Default: the daemon's heartbeat_ms; 0 sends none. */
    heartbeatMs?: number;
    ackTimeoutMs?: number;
    ackRetryForMs?: number;
    registerTimeoutMs?: number;
    registerRetryForMs?: number;
    errorPauseMs?: number;
}

export interface Registered {
    consumerId: string;
    pullSubject: string;
    ackSubject: string;
    heartbeatSubject: string;
    byeSubject: string;
    heartbeatMs: number;
    deadAfterMs: number;
    ackWaitMs: number;
    protocolVersion: number;
}

export interface AckReply {
    acked: number;
    returned: number;
    unknown: number;
    error: string;
    /** '' when the reply carried no error; else unknown_batch, unknown_position, unknown_consumer, ... */
    code: string;
}

export interface AckOptions {
    timeoutMs?: number;
    retryForMs?: number;
}

export interface BatchItem {
    id: Buffer;
    tokens: number;
    payload: Buffer;
    replyTo: string;
    /** 1 on the first delivery. */
    deliveries: number;
    /** The tokens of the item's shape's cacheable prefix, as its producer declared them (0 = unknown). */
    prefixTokens: number;
}

export declare class Batch {
    readonly batchId: bigint;
    readonly model: string;
    readonly signature: bigint;
    readonly lane: number;
    readonly padTo: number;
    readonly items: BatchItem[];
    readonly done: boolean;
    positions(): number[];
    ack(opts?: AckOptions): Promise<AckReply>;
    settle(positions?: { ack?: number[]; nak?: number[] }, opts?: AckOptions): Promise<AckReply>;
    nak(positions?: number[], opts?: AckOptions): Promise<AckReply>;
    inProgress(opts?: AckOptions): Promise<AckReply>;
    release(): void;
}

export declare class Consumer extends EventEmitter {
    readonly id: string | null;
    readonly info: Registered | null;
    readonly closed: Promise<void>;
    next(opts?: { timeoutMs?: number }): Promise<Batch | null>;
    [Symbol.asyncIterator](): AsyncIterator<Batch>;
    close(opts?: { bye?: boolean; timeoutMs?: number }): Promise<{ error: string; code: string } | null>;
    on(event: 'registered', listener: (info: Registered) => void): this;
    on(event: 'warning', listener: (err: Error) => void): this;
}

export declare class LanesClient {
    readonly nc: NatsConnection;
    readonly prefix: string;
    readonly inboxPrefix: string | undefined;
    readonly maxPayload: number;
    subject(...parts: string[]): string;
    newInbox(): string;
    submit(model: string, items: Item[], opts?: SubmitOptions): Promise<SubmitResult>;
    send(model: string, items: Item[], opts?: SubmitOptions): Promise<{ sent: number; oversized: number[] }>;
    consumer(opts: ConsumerOptions): Promise<Consumer>;
    stats(opts?: { timeoutMs?: number; retryForMs?: number }): Promise<Record<string, any>>;
    close(opts?: { bye?: boolean; timeoutMs?: number }): Promise<void>;
}

export declare function connect(opts?: ConnectOptions): Promise<LanesClient>;

export declare class LanesError extends Error {
    /** A stable code word: the daemon's or the codec's, or timeout, no_responders, closed, ... */
    readonly code: string;
    constructor(code: string, message?: string, options?: { cause?: unknown });
}
export declare function codeWord(error: string): string;
/** Throws LanesError bad_model, model_too_long or bad_model_name (codec/validate.c's rule). */
export declare function modelCheck(model: string): void;
export declare const MODEL_MAX: number;

export declare function shapeHash(component: Bytes): bigint;
export declare function shapeSign(components: Iterable<Bytes>): bigint;
export declare function shapeSignHashes(hashes: bigint[]): bigint;
export declare function shapeFormat(signature: bigint): string;
export declare function shapeParse(text: string): bigint;

export declare function encode(name: string, obj: Record<string, unknown>): Uint8Array;
export declare function decode(name: string, bytes: Uint8Array): Record<string, any>;
export declare const ItemStatus: Record<string, number>;
export declare const BatchStatus: Record<string, number>;
export declare const protoPath: string;

export declare const PROTOCOL_VERSION: number;
export declare const CONNECT_OPTIONS: readonly string[];
export declare const CONSUMER_OPTIONS: readonly string[];
export declare const ITEM_FIELDS: readonly string[];
export declare const SUBMIT_OPTIONS: readonly string[];
export declare const REPLY_BYTES_PER_ITEM: number;
export declare const SUBMIT_MAX_ITEMS: number;
export declare function submitPlan(
    encoded: { bytes: Uint8Array; idLen: number }[],
    maxPayload: number,
    maxItems?: number,
): { chunks: number[][]; oversized: number[] };
export declare function workItem(model: string, item: Item, now?: bigint): Record<string, unknown>;
export declare const RETRY_DEFAULTS: Readonly<{ timeoutMs: number; retryForMs: number; backoffMs: number; maxBackoffMs: number }>;

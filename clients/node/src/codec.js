// codec.js - every lanesched message to and from bytes, through protobufjs and the package's copy
// of the repository's codec/lanes.proto (proto/lanes.proto; test/schema.test.js fails when the
// copy differs from codec/lanes.proto, so it cannot drift unnoticed).
//
// Invariants:
//   1. 64-bit fields (fixed64 signatures and hashes, uint64 batch ids and times) are BigInt on
//      this side of the codec, in both directions: a JavaScript number holds only 53 bits, and
//      protobufjs silently encodes a BigInt it was handed as 0, so every value is converted to
//      and from Long here and nowhere else.
//   2. Decoded messages are plain objects with the schema's own field names (snake_case, as in
//      subjects.md), every field present (proto3 defaults filled in: 0, "", false, empty
//      arrays, empty Buffers), enums as their numbers.
//   3. Bytes fields decode to Buffers; strings and Uint8Arrays are accepted where bytes go.
//
// Rejected: generating static code with pbjs (a build step, and code that hides the schema);
// protobufjs's own toObject({longs: BigInt}) alone (it only covers decoding, not encoding);
// reading ../../codec/lanes.proto at run time (outside the package: an installed copy has no
// repository around it).
import { fileURLToPath } from 'node:url';
import Long from 'long';
import protobuf from 'protobufjs';

protobuf.util.Long = Long;
protobuf.configure();

/** Path of the lanes.proto this package reads: its own copy, inside the package. */
export const protoPath = fileURLToPath(new URL('../proto/lanes.proto', import.meta.url));

const root = new protobuf.Root().loadSync(protoPath, { keepCase: true });

function type(name) {
    return root.lookupType(`lanes.v1.${name}`);
}

/** The message types of lanes.proto, by name (protobufjs Type objects). */
export const types = Object.fromEntries(
    [
        'WorkItem',
        'Submit',
        'ItemResult',
        'SubmitReply',
        'Register',
        'Registered',
        'Pull',
        'BatchItem',
        'Batch',
        'Ack',
        'AckReply',
        'Heartbeat',
    ].map((n) => [n, type(n)]),
);

/** Enum values as protobufjs sees them: { ITEM_STATUS_ACCEPTED: 0, ... }. */
export const ItemStatus = root.lookupEnum('lanes.v1.ItemStatus').values;
export const BatchStatus = root.lookupEnum('lanes.v1.BatchStatus').values;

const LONG_TYPES = new Set(['fixed64', 'uint64', 'int64', 'sfixed64', 'sint64']);
const UNSIGNED = new Set(['fixed64', 'uint64']);

function toLong(value, unsigned) {
    if (typeof value === 'bigint') return Long.fromBigInt(BigInt.asUintN(64, value), unsigned);
    if (typeof value === 'number') {
        if (!Number.isSafeInteger(value))
            throw new RangeError(`64-bit value ${value} is not a safe integer: use a BigInt`);
        return Long.fromNumber(value, unsigned);
    }
    if (typeof value === 'string') return Long.fromString(value, unsigned);
    if (Long.isLong(value)) return value;
    throw new TypeError(`64-bit value of type ${typeof value}: use a BigInt`);
}

function fromLong(value) {
    if (typeof value === 'number') return BigInt(value);
    if (typeof value === 'bigint') return value;
    return BigInt.asUintN(64, Long.fromValue(value).toBigInt());
}

function toBytes(value) {
    if (typeof value === 'string') return Buffer.from(value, 'utf8');
    return value;
}

// The object protobufjs encodes: 64-bit fields as Long, bytes from strings.
function prepare(t, obj) {
    const out = {};
    for (const f of t.fieldsArray) {
        let v = obj[f.name];
        if (v === undefined || v === null) continue;
        const one = (x) => {
            if (f.resolvedType instanceof protobuf.Type) return prepare(f.resolvedType, x);
            if (LONG_TYPES.has(f.type)) return toLong(x, UNSIGNED.has(f.type));
            if (f.type === 'bytes') return toBytes(x);
            return x;
        };
        out[f.name] = f.repeated ? Array.from(v, one) : one(v);
    }
    return out;
}

function bufferOf(x) {
    if (x === undefined || x === null) return Buffer.alloc(0);
    if (Array.isArray(x)) return Buffer.from(x);
    return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
}

// The plain object a decoded message becomes (invariant 2).
function plain(t, msg) {
    const out = {};
    for (const f of t.fieldsArray) {
        const v = msg[f.name];
        const one = (x) => {
            if (f.resolvedType instanceof protobuf.Type) return plain(f.resolvedType, x);
            if (LONG_TYPES.has(f.type)) return fromLong(x);
            if (f.type === 'bytes') return bufferOf(x);
            return x;
        };
        out[f.name] = f.repeated ? Array.from(v ?? [], one) : one(v);
    }
    return out;
}

/** Encodes obj (schema field names, 64-bit values as BigInt) as message `name`: a Uint8Array. */
export function encode(name, obj) {
    const t = types[name];
    const msg = prepare(t, obj ?? {});
    const err = t.verify(msg);
    if (err) throw new TypeError(`${name}: ${err}`);
    return t.encode(t.fromObject(msg)).finish();
}

/** Decodes bytes as message `name` into a plain object (invariant 2); throws on bad bytes. */
export function decode(name, bytes) {
    const t = types[name];
    return plain(t, t.decode(bytes));
}

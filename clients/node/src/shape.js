// shape.js - shape signatures (subjects.md, "Shape signatures and test vectors").
//
// Invariants:
//   1. h_i = XXH64(component bytes, seed 0); a string component is its UTF-8 bytes, no
//      terminator.
//   2. signature = XXH64(h_0 || ... || h_{n-1}, seed 0), each h_i as 8 little-endian bytes
//      whatever the host's byte order; no components hashes zero bytes (0xef46db3751d8e999).
//   3. Every hash and signature is a BigInt in 0 .. 2^64 - 1 (a number cannot hold 64 bits).
//
// Rejected: a pure-JavaScript XXH64 (slow on BigInt arithmetic, and one more thing to get wrong);
// xxhash-wasm's h64() on strings (it hashes the same UTF-8 bytes, but one path for both kinds of
// component keeps invariant 1 in one place).
import xxhash from 'xxhash-wasm';

const { h64Raw } = await xxhash();
const utf8 = new TextEncoder();

function bytesOf(component) {
    if (typeof component === 'string') return utf8.encode(component);
    if (component instanceof Uint8Array) return component;
    throw new TypeError('a shape component is a string or a Uint8Array');
}

/** XXH64 (seed 0) of one component (string as UTF-8, or bytes): a BigInt. */
export function shapeHash(component) {
    return h64Raw(bytesOf(component), 0n);
}

/** The signature of component hashes given in order (BigInts): a BigInt. */
export function shapeSignHashes(hashes) {
    const buf = new Uint8Array(8 * hashes.length);
    const view = new DataView(buf.buffer);
    hashes.forEach((h, i) => view.setBigUint64(8 * i, BigInt.asUintN(64, BigInt(h)), true));
    return h64Raw(buf, 0n);
}

/** The signature of a prompt's cacheable components, in order: a BigInt. */
export function shapeSign(components) {
    return shapeSignHashes(Array.from(components, shapeHash));
}

/** A signature as subjects.md and P.stats write it: "0x" and 16 lowercase hex digits. */
export function shapeFormat(signature) {
    return `0x${BigInt.asUintN(64, signature).toString(16).padStart(16, '0')}`;
}

/** Parses "0x..." (or bare hex) into a signature BigInt; throws on anything else. */
export function shapeParse(text) {
    const m = /^(?:0x)?([0-9a-fA-F]{1,16})$/.exec(text);
    if (!m) throw new SyntaxError(`not a 64-bit hex signature: ${JSON.stringify(text)}`);
    return BigInt(`0x${m[1]}`);
}

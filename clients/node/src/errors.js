// errors.js - the one error class of the package, named by a stable code word.
//
// Invariants:
//   1. LanesError.code is a daemon code word (subjects.md, "Error words": the text up to the
//      first ':') or one of this package's own: timeout, no_responders, closed, too_large.
//   2. A code word is decided from the word alone, never from the text after it, which may
//      change between daemon versions.
//
// Rejected: one subclass per word (callers would test instanceof against a list that grows with
// the daemon's; a string compares the same way in every language).

/** The code word of an error string: "unknown_batch: ..." -> "unknown_batch"; "" -> "". */
export function codeWord(error) {
    if (!error) return '';
    const i = error.indexOf(':');
    return (i < 0 ? error : error.slice(0, i)).trim();
}

/** An error with a stable code word (invariant 1) and the daemon's or NATS's text. */
export class LanesError extends Error {
    constructor(code, message, options) {
        super(message ? `${code}: ${message}` : code, options);
        this.name = 'LanesError';
        this.code = code;
    }
}

/** The LanesError of a reply's error string "code_word: text". */
export function errorFromReply(error) {
    const code = codeWord(error);
    const rest = error.slice(error.indexOf(':') + 1).trim();
    return new LanesError(code, error.includes(':') ? rest : '');
}

/** Throws TypeError when opts names a key that is not in allowed (unknown options are refused,
 *  never dropped: a misspelt option would silently keep its default). */
export function optionsCheck(what, opts, allowed) {
    if (opts === undefined || opts === null) return;
    if (typeof opts !== 'object') throw new TypeError(`${what}: options must be an object`);
    const unknown = Object.keys(opts).filter((k) => !allowed.includes(k));
    if (unknown.length > 0) {
        throw new TypeError(`${what}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${allowed.join(', ')})`);
    }
}

/** The longest model name in bytes (common/limits.h's LIMITS_MODEL_MAX). */
export const MODEL_MAX = 255;

/**
 * codec_model_check of codec/validate.c, rule for rule and word for word: throws LanesError
 * bad_model (empty or not a string), model_too_long or bad_model_name, so a bad name fails at once
 * instead of timing out on a subject no daemon serves.
 */
export function modelCheck(model) {
    if (typeof model !== 'string' || model === '') throw new LanesError('bad_model', 'model is empty');
    const b = Buffer.from(model, 'utf8');
    if (b.length > MODEL_MAX) throw new LanesError('model_too_long', `model is longer than ${MODEL_MAX} bytes`);
    for (let i = 0; i < b.length; i++) {
        const c = b[i];
        const emptyToken = c === 0x2e && (i === 0 || i + 1 === b.length || b[i + 1] === 0x2e);
        if (c <= 0x20 || c === 0x7f || c === 0x2a || c === 0x3e || emptyToken) {
            throw new LanesError(
                'bad_model_name',
                `model ${JSON.stringify(model)} contains '*', '>', a space or control character, or an empty token`,
            );
        }
    }
}

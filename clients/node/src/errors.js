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

// errors.go - the package's one error type, named by a stable code word (subjects.md, "Error
// words"), and the model-name rule of codec/validate.c.
//
// Invariants:
//  1. Error.Code is a daemon or codec code word (the text up to the first ':') or one of this
//     package's own: timeout, no_responders, closed, bad_reply, bad_argument.
//  2. A code word is decided from the word alone, never from the text after it.
//  3. CheckModel is codec_model_check of codec/validate.c, rule for rule and word for word, so a
//     bad name fails before anything is sent instead of timing out on a subject nobody serves.
package lanes

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is an error with a stable code word; compare Code, never the text.
type Error struct {
	Code string
	Text string
}

func (e *Error) Error() string {
	if e.Text == "" {
		return e.Code
	}
	return e.Code + ": " + e.Text
}

// ErrClosed is returned by calls on a closed client or consumer.
var ErrClosed = &Error{Code: "closed", Text: "closed"}

// CodeWord is the code word of an error string: "unknown_batch: ..." -> "unknown_batch".
func CodeWord(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func errorFromReply(s string) *Error {
	code := CodeWord(s)
	text := ""
	if i := strings.IndexByte(s, ':'); i >= 0 {
		text = strings.TrimSpace(s[i+1:])
	}
	return &Error{Code: code, Text: text}
}

// IsCode says whether err is a lanesched Error with this code word.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// ModelMax is the longest model name in bytes (common/limits.h's LIMITS_MODEL_MAX).
const ModelMax = 255

// CheckModel returns nil for a model name the daemon accepts, else an Error with the codec's
// word: bad_model (empty), model_too_long, bad_model_name (invariant 3).
func CheckModel(model string) error {
	if model == "" {
		return &Error{Code: "bad_model", Text: "model is empty"}
	}
	if len(model) > ModelMax {
		return &Error{Code: "model_too_long", Text: fmt.Sprintf("model is longer than %d bytes", ModelMax)}
	}
	for i := 0; i < len(model); i++ {
		c := model[i]
		emptyToken := c == '.' && (i == 0 || i+1 == len(model) || model[i+1] == '.')
		if c <= ' ' || c == 0x7f || c == '*' || c == '>' || emptyToken {
			return &Error{Code: "bad_model_name", Text: fmt.Sprintf("model %q contains '*', '>', a space or control character, or an empty token", model)}
		}
	}
	if !utf8.ValidString(model) {
		return &Error{Code: "bad_model_name", Text: fmt.Sprintf("model %q is not UTF-8", model)}
	}
	return nil
}

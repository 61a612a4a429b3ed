// submit.go - the producer: WorkItems to P.submit.<model>, per-item verdicts back (subjects.md,
// "P.submit.<model>" and "Delivery guarantees / Submitting").
//
// Invariants:
//  1. The model name is checked before anything is sent (CheckModel).
//  2. Each Submit is encoded once and every retry sends those bytes: the same ids, so the
//     daemon's dedupe stores each item once and answers DUPLICATE for what a lost attempt stored.
//  3. Submits are cut to fit the server's max_payload, message and reply both, at most MaxItems
//     each, sent in order; an item too large alone is not sent and gets REJECTED /
//     payload_too_large.
//  4. A status this package does not know reads as rejected.
package lanes

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	// ReplyBytesPerItem and replyBytesFixed bound a SubmitReply (subjects.md, "How many items in
	// one Submit"): the daemon keeps each ItemResult within its id plus 160 bytes.
	ReplyBytesPerItem = 160
	replyBytesFixed   = 256
	// SubmitMaxItems: one Submit is handled in one daemon turn and answered after its flush, so
	// 1,000 items at most keep every other producer's replies prompt.
	SubmitMaxItems = 1000
)

// Item is one unit of work. The shape is Components (hashed here), Signature, ComponentHashes
// (the daemon computes the signature) or the last two together (the daemon checks they agree);
// none: the empty shape. PrefixTokens and MaxWaitMs: 0 = not sent.
type Item struct {
	ID              []byte
	Tokens          uint32
	Components      []string
	Signature       uint64
	ComponentHashes []uint64
	Payload         []byte
	ReplyTo         string
	CreatedUnixNs   uint64 // 0: the time of the Submit
	PrefixTokens    uint32
	MaxWaitMs       uint32
}

// ItemStatus of a verdict.
type ItemStatus int

const (
	Accepted  ItemStatus = 0
	Duplicate ItemStatus = 1
	Rejected  ItemStatus = 2
)

func (s ItemStatus) String() string {
	switch s {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	}
	return "rejected"
}

// ItemResult is the daemon's verdict on one item; Reason is the code word (ok, duplicate,
// zero_tokens, queue_full, ...).
type ItemResult struct {
	ID     []byte
	Status ItemStatus
	Reason string
}

// SubmitResult holds one ItemResult per item, in order.
type SubmitResult struct {
	Results                       []ItemResult
	Accepted, Duplicate, Rejected int
	Attempts                      int // Submit messages sent (items cut to max_payload), not resends
}

// Submit submits items for model and returns once the daemon made the accepted ones durable.
// Errors: the codec's word for a bad model name; the daemon's word for a message refused whole
// (malformed, too_many_items, reply_too_large); timeout / no_responders when a Submit got no
// reply before ctx ended (or SubmitRetryFor passed): submit everything again later, the items
// already stored come back duplicate.
func (c *Client) Submit(ctx context.Context, model string, items []Item) (*SubmitResult, error) {
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	now := uint64(time.Now().UnixNano())
	enc := make([][]byte, len(items))
	for i, it := range items {
		w := wireItem{id: it.ID, model: model, componentHashes: it.ComponentHashes, tokens: it.Tokens,
			payload: it.Payload, replyTo: it.ReplyTo, createdUnixNs: it.CreatedUnixNs,
			prefixTokens: it.PrefixTokens, maxWaitMs: it.MaxWaitMs, signature: it.Signature}
		if w.createdUnixNs == 0 {
			w.createdUnixNs = now
		}
		if w.signature == 0 && len(it.Components) > 0 {
			w.signature = ShapeSign(it.Components...)
		}
		if w.signature == 0 && len(it.ComponentHashes) == 0 {
			w.signature = EmptySignature
		}
		enc[i] = w.encode()
	}
	maxPayload := int(c.nc.MaxPayload())
	if maxPayload <= 0 {
		maxPayload = 1 << 20
	}
	out := &SubmitResult{Results: make([]ItemResult, len(items))}
	var chunks [][]int
	var cur []int
	msg, rep := 0, 0
	for i, e := range enc {
		m := 1 + protowire.SizeVarint(uint64(len(e))) + len(e)
		r := ReplyBytesPerItem + len(items[i].ID)
		if m > maxPayload || r+replyBytesFixed > maxPayload {
			out.Results[i] = ItemResult{ID: items[i].ID, Status: Rejected, Reason: "payload_too_large"}
			continue
		}
		if cur == nil || len(cur) >= c.opts.MaxItems || msg+m > maxPayload || rep+r > maxPayload {
			if cur != nil {
				chunks = append(chunks, cur)
			}
			cur, msg, rep = nil, 0, replyBytesFixed
		}
		cur = append(cur, i)
		msg += m
		rep += r
	}
	if cur != nil {
		chunks = append(chunks, cur)
	}
	subject := c.Subject("submit", model)
	for _, idx := range chunks {
		parts := make([][]byte, len(idx))
		for k, i := range idx {
			parts[k] = enc[i]
		}
		body := submitEncode(parts)
		out.Attempts++
		reply, err := c.requestRetry(ctx, subject, body, c.opts.SubmitTimeout, c.opts.SubmitRetryFor)
		if err != nil {
			return nil, err
		}
		r, err := submitReplyDecode(reply.Data)
		if err != nil {
			return nil, &Error{Code: "bad_reply", Text: "SubmitReply did not decode"}
		}
		if r.error != "" {
			return nil, errorFromReply(r.error)
		}
		if len(r.results) != len(idx) {
			return nil, &Error{Code: "bad_reply", Text: fmt.Sprintf("%d results for %d items", len(r.results), len(idx))}
		}
		for k, i := range idx {
			st := ItemStatus(r.results[k].status)
			if st != Accepted && st != Duplicate {
				st = Rejected // invariant 4
			}
			out.Results[i] = ItemResult{ID: items[i].ID, Status: st, Reason: r.results[k].reason}
		}
	}
	for _, r := range out.Results {
		switch r.Status {
		case Accepted:
			out.Accepted++
		case Duplicate:
			out.Duplicate++
		default:
			out.Rejected++
		}
	}
	return out, nil
}

// dead.go - dead letters: the items the daemon gave up on (past --max-deliveries or the model's
// age limit), each published alone on P.dead.<model> (subjects.md, "P.dead.<model>").
//
// Invariants:
//  1. Only a Batch with status ERROR and exactly one item is a DeadLetter; any other message on
//     the subject is reported as a bad_reply error, never as a dead letter.
//  2. The item is completed when it is published: a DeadLetter is the producer's last word on it.
//
// Rejected: a queue of dead letters kept by the client. They are core NATS publishes, so a
// subscriber that was not there when one went never gets it, and a buffer would only hide that.
package lanes

import (
	"strconv"

	"github.com/nats-io/nats.go"
)

// DeadLetter is one item the daemon gave up on: its model and shape, the item as it was last
// delivered (Deliveries counts the deliveries), and why (the Batch's error text, for example
// "delivery_limit: delivered 5 times" or "expired: queued longer than ...").
type DeadLetter struct {
	Model     string
	Signature uint64
	Item      BatchItem
	Reason    string
}

// DecodeDeadLetter decodes one message of P.dead.<model> (invariant 1).
func DecodeDeadLetter(data []byte) (*DeadLetter, error) {
	b, err := batchDecode(data)
	if err != nil {
		return nil, &Error{Code: "bad_reply", Text: "a dead letter that is not a Batch: " + err.Error()}
	}
	if b.status != batchError || len(b.items) != 1 {
		return nil, &Error{Code: "bad_reply", Text: "not a dead letter: a Batch of status " +
			strconv.FormatUint(b.status, 10) + " with " + strconv.Itoa(len(b.items)) + " items"}
	}
	return &DeadLetter{Model: b.model, Signature: b.signature, Item: b.items[0], Reason: b.error}, nil
}

// DeadLetters subscribes to the dead letters of model ("" for every model: P.dead.>) and calls
// fn for each from the subscription's goroutine, with (nil, err) for a message that is not one.
// Only dead letters published while the subscription exists arrive. They carry every producer's
// payloads: on a shared fabric only a role allowed to read all the work may subscribe
// (docs/security.md).
func (c *Client) DeadLetters(model string, fn func(*DeadLetter, error)) (*nats.Subscription, error) {
	subject := c.Subject("dead", ">")
	if model != "" {
		if err := CheckModel(model); err != nil {
			return nil, err
		}
		subject = c.Subject("dead", model)
	}
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) { fn(DecodeDeadLetter(m.Data)) })
	if err != nil {
		return nil, natsError(err)
	}
	return sub, nil
}

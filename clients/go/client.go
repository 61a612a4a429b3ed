// Package lanes is the Go client of lanesched: producers submit work items and consumers receive
// shape-pure batches, over NATS with Debian's nats.go (subjects.md is the contract).
//
// client.go - a NATS connection used as a lanesched client: the options, subjects under the
// prefix, P.stats.
//
// Invariants:
//  1. Every subject under the prefix is prefix + "." + verb [+ "." + rest]; consumer subjects
//     are never built here: a consumer uses the four its Registered names.
//  2. A connection the caller passed in (Options.Conn) is borrowed: Close leaves it open.
//  3. Every blocking call takes a context.Context and returns when it is done.
package lanes

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ProtocolVersion is the highest version of the contract this package speaks.
const ProtocolVersion = 1

// Options of Connect. Zero values mean the defaults.
type Options struct {
	Servers     string        // comma-separated URLs; default env LANESCHED_SERVER or nats://127.0.0.1:4222
	Prefix      string        // default env LANESCHED_PREFIX or "lanes"
	InboxPrefix string        // replies and batches arrive under it; default nats.go's "_INBOX"
	Name        string        // connection name; default "lanesched-go"
	NATS        []nats.Option // more options for nats.Connect: nats.UserInfo, nats.Token, nats.UserCredentials, TLS, ...
	Conn        *nats.Conn    // a connection of yours to use instead (borrowed; the other fields but Prefix are ignored)

	SubmitTimeout  time.Duration // one Submit attempt's wait; 2 s
	SubmitRetryFor time.Duration // how long a Submit is resent while no reply comes, when the context has no deadline; 60 s
	MaxItems       int           // items per Submit at most; 1000
}

// Client is one NATS connection speaking lanesched's contract.
type Client struct {
	nc     *nats.Conn
	owned  bool
	prefix string
	inbox  string
	opts   Options

	mu        sync.Mutex
	consumers map[*Consumer]struct{}
	closed    bool
}

// Connect opens a client (invariant 3: ctx bounds the connection's first attempt).
func Connect(ctx context.Context, o Options) (*Client, error) {
	if o.Prefix == "" {
		o.Prefix = os.Getenv("LANESCHED_PREFIX")
	}
	if o.Prefix == "" {
		o.Prefix = "lanes"
	}
	if o.SubmitTimeout <= 0 {
		o.SubmitTimeout = 2 * time.Second
	}
	if o.SubmitRetryFor <= 0 {
		o.SubmitRetryFor = 60 * time.Second
	}
	if o.MaxItems <= 0 {
		o.MaxItems = SubmitMaxItems
	}
	c := &Client{prefix: o.Prefix, opts: o, consumers: map[*Consumer]struct{}{}}
	if o.Conn != nil {
		c.nc = o.Conn
		c.inbox = "_INBOX"
		return c, nil
	}
	servers := o.Servers
	if servers == "" {
		servers = os.Getenv("LANESCHED_SERVER")
	}
	if servers == "" {
		servers = nats.DefaultURL
	}
	name := o.Name
	if name == "" {
		name = "lanesched-go"
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	c.inbox = "_INBOX"
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
		c.inbox = o.InboxPrefix
	}
	if dl, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(dl)))
	}
	opts = append(opts, o.NATS...)
	type res struct {
		nc  *nats.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		nc, err := nats.Connect(servers, opts...)
		ch <- res{nc, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, &Error{Code: "connect", Text: r.err.Error()}
		}
		c.nc, c.owned = r.nc, true
		return c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Conn is the NATS connection (for results on reply_to subjects and anything else).
func (c *Client) Conn() *nats.Conn { return c.nc }

// Prefix is the subject prefix in use.
func (c *Client) Prefix() string { return c.prefix }

// Subject is prefix.parts... (invariant 1).
func (c *Client) Subject(parts ...string) string {
	return strings.Join(append([]string{c.prefix}, parts...), ".")
}

// NewInbox is a fresh subject under the inbox prefix, e.g. for an item's ReplyTo.
func (c *Client) NewInbox() string { return c.nc.NewInbox() }

// Stats is P.stats, parsed (the first instance to answer).
func (c *Client) Stats(ctx context.Context) (map[string]any, error) {
	msg, err := c.nc.RequestWithContext(ctx, c.Subject("stats"), nil)
	if err != nil {
		return nil, natsError(err)
	}
	var out map[string]any
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		return nil, &Error{Code: "bad_reply", Text: "P.stats did not answer JSON"}
	}
	return out, nil
}

// Close closes every consumer (with Bye), then the connection if Connect opened it.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	ks := make([]*Consumer, 0, len(c.consumers))
	for k := range c.consumers {
		ks = append(ks, k)
	}
	c.mu.Unlock()
	for _, k := range ks {
		k.Close(ctx, true)
	}
	if c.owned {
		c.nc.Close()
	}
	return nil
}

func natsError(err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return &Error{Code: "no_responders", Text: err.Error()}
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: "timeout", Text: err.Error()}
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, nats.ErrConnectionClosed):
		return ErrClosed
	}
	return &Error{Code: "nats", Text: err.Error()}
}

// retriable: no reply yet (a timeout or nobody listening), never an answer.
func retriable(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// requestRetry sends the same bytes until a reply comes, ctx is done, or retryFor passes
// (when ctx has no deadline). Between attempts after a no-responders answer it waits 100 ms
// doubling to 2 s.
func (c *Client) requestRetry(ctx context.Context, subject string, data []byte, timeout, retryFor time.Duration) (*nats.Msg, error) {
	if _, ok := ctx.Deadline(); !ok && retryFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, retryFor)
		defer cancel()
	}
	wait := 100 * time.Millisecond
	var last error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		msg, err := c.nc.RequestWithContext(actx, subject, data)
		cancel()
		if err == nil {
			return msg, nil
		}
		if !retriable(err) {
			return nil, natsError(err)
		}
		last = err
		if ctx.Err() != nil {
			e := natsError(last)
			if le, ok := e.(*Error); ok {
				le.Text = subject + ": no reply after " + itoa(attempt) + " attempts"
			}
			return nil, e
		}
		if errors.Is(err, nats.ErrNoResponders) {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
			if wait *= 2; wait > 2*time.Second {
				wait = 2 * time.Second
			}
		}
	}
}

func itoa(n int) string {
	b := []byte{}
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

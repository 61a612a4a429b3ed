// consumer.go - a lanesched consumer: register, pulls kept outstanding on its own inbox,
// heartbeats, acks, bye, and registering again when the daemon no longer knows it (subjects.md,
// "Consumer life cycle").
//
// Invariants:
//  1. Each registration is a generation. Pull reply subjects are inbox.<generation>.<seq>, so
//     every Batch is matched to the registration it was dispatched to; one of an earlier
//     generation is never handed out (it is returned at once with a nak on that generation's
//     ack subject).
//  2. Outstanding pulls (one credit each) plus batches delivered and not yet taken by Next stay
//     at Prefetch.
//  3. Every pull has a local deadline of its expiry plus max(heartbeat_ms, 1 s). A pull that ends
//     without any message, or with the server's no-responders status, is a lost pull: the
//     consumer asks whether it is still known (an Ack for batch 0: unknown_batch = known) and
//     registers again on unknown_consumer or no answer.
//  4. unknown_consumer from a pull, an ack or that probe registers again once per generation,
//     dropping the old generation's pulls, queued batches and in-progress set; registering again
//     retries with backoff until it works or the consumer is closed. A generation that ends
//     within reregisterCalm of its registration makes the next one wait first (200 ms, doubling
//     to 5 s): a daemon that forgets every registration at once (a misconfiguration, a hostile
//     responder) gets a registration every few seconds, not a loop of them.
//  5. A heartbeat goes out every heartbeat_ms listing the in-progress set: every delivered batch
//     not yet settled or released.
//  6. The four subjects are the Registered reply's; nothing builds one from the consumer id.
//  7. After Close nothing is sent except the Bye, and Next returns ErrClosed.
//
// Rejected: one pull with Prefetch credits (a single lost message would leave no pull out);
// re-registering on every pull timeout without asking first (in-flight batches would be given up
// on one lost message).
package lanes

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ConsumerOptions: Model, MaxBatchSize and MaxBatchTokens are required.
type ConsumerOptions struct {
	Model          string
	MaxBatchSize   uint32
	MaxBatchTokens uint32
	MaxInputTokens uint32 // 0 = unlimited
	Name           string
	// The worker's declared cost and cache (subjects.md, P.register.<model>); all 0: the daemon
	// estimates the cost from the worker's batch times, and the cache holds 1 shape.
	BatchFixedUs uint32 // fixed cost per batch, microseconds
	TokenNs      uint32 // cost per padded token, nanoseconds
	CacheShapes  uint32 // prompt shapes the prefix cache keeps warm

	Prefetch     int           // pulls outstanding plus batches not yet taken; 2
	PullExpires  time.Duration // each pull's wait; 5 s
	Heartbeat    time.Duration // 0: the daemon's heartbeat_ms; negative: none
	AckTimeout   time.Duration // one Ack, Bye or probe attempt; 2 s
	AckRetryFor  time.Duration // how long the same Ack is resent without a reply; 10 s
	RegisterWait time.Duration // one Register attempt; 2 s
	OnWarning    func(error)   // what the consumer rode out; nil: dropped
}

type pull struct {
	gen   uint64
	timer *time.Timer
}

// Consumer receives batches of one model.
type Consumer struct {
	c    *Client
	o    ConsumerOptions
	sub  *nats.Subscription
	box  string
	done chan struct{}

	mu            sync.Mutex
	info          *Registered
	gen           uint64
	seq           uint64
	pulls         map[uint64]*pull
	queue         []*Batch
	notify        chan struct{}
	inProgress    map[uint64]*Batch
	oldAck        map[uint64]string
	reregistering bool
	registeredAt  time.Time     // of the current generation
	reregWait     time.Duration // before the next registration again (invariant 4)
	probing       bool
	paused        bool
	closed        bool
	registrations int
}

// Consumer registers a consumer and starts pulling and heartbeating. The registration is retried
// while no daemon answers, until ctx is done; a refusal is an Error with the daemon's word.
func (c *Client) Consumer(ctx context.Context, o ConsumerOptions) (*Consumer, error) {
	if err := CheckModel(o.Model); err != nil {
		return nil, err
	}
	if o.MaxBatchSize == 0 {
		return nil, &Error{Code: "zero_batch_size", Text: "MaxBatchSize must be greater than zero"}
	}
	if o.MaxBatchTokens == 0 {
		return nil, &Error{Code: "zero_batch_tokens", Text: "MaxBatchTokens must be greater than zero"}
	}
	if o.Prefetch <= 0 {
		o.Prefetch = 2
	}
	if o.PullExpires <= 0 {
		o.PullExpires = 5 * time.Second
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 2 * time.Second
	}
	if o.AckRetryFor <= 0 {
		o.AckRetryFor = 10 * time.Second
	}
	if o.RegisterWait <= 0 {
		o.RegisterWait = 2 * time.Second
	}
	k := &Consumer{c: c, o: o, box: c.nc.NewInbox(), done: make(chan struct{}), pulls: map[uint64]*pull{},
		notify: make(chan struct{}, 1), inProgress: map[uint64]*Batch{}, oldAck: map[uint64]string{}}
	sub, err := c.nc.Subscribe(k.box+".>", k.onMessage)
	if err != nil {
		return nil, natsError(err)
	}
	k.sub = sub
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if err := k.register(ctx); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	go k.heartbeats()
	k.mu.Lock()
	k.topUp()
	k.mu.Unlock()
	c.mu.Lock()
	c.consumers[k] = struct{}{}
	c.mu.Unlock()
	return k, nil
}

func (k *Consumer) warn(err error) {
	if k.o.OnWarning != nil {
		k.o.OnWarning(err)
	}
}

// ID is the current consumer id (it changes when the consumer registers again).
func (k *Consumer) ID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.info.ConsumerID
}

// Registration is the current registration (a copy).
func (k *Consumer) Registration() Registered {
	k.mu.Lock()
	defer k.mu.Unlock()
	return *k.info
}

// Registrations counts successful registrations (1 + registering again).
func (k *Consumer) Registrations() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.registrations
}

func (k *Consumer) register(ctx context.Context) error {
	o := k.o
	body := (&wireRegister{model: o.Model, maxBatchSize: o.MaxBatchSize, maxBatchTokens: o.MaxBatchTokens,
		maxInputTokens: o.MaxInputTokens, name: o.Name, batchFixedUs: o.BatchFixedUs, tokenNs: o.TokenNs,
		cacheShapes: o.CacheShapes}).encode()
	msg, err := k.c.requestRetry(ctx, k.c.Subject("register", o.Model), body, o.RegisterWait, 0)
	if err != nil {
		return err
	}
	r, err := registeredDecode(msg.Data)
	if err != nil {
		return &Error{Code: "bad_reply", Text: "Registered did not decode"}
	}
	if r.Error != "" {
		return errorFromReply(r.Error)
	}
	if r.PullSubject == "" || r.AckSubject == "" || r.HeartbeatSubject == "" || r.ByeSubject == "" {
		return &Error{Code: "bad_reply", Text: "Registered without its subjects"}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		k.c.nc.Publish(r.ByeSubject, nil) // created while closing: leave
		return ErrClosed
	}
	if k.info != nil {
		k.oldAck[k.gen] = k.info.AckSubject
		delete(k.oldAck, k.gen-4)
	}
	k.gen++
	k.info = r
	k.registrations++
	k.registeredAt = time.Now()
	if r.ProtocolVersion > ProtocolVersion {
		k.warn(&Error{Code: "protocol_version", Text: "the daemon speaks version " + strconv.Itoa(int(r.ProtocolVersion))})
	}
	return nil
}

// reregisterCalm: a generation that lived this long ends without delaying the next (invariant 4).
const reregisterCalm = 10 * time.Second

// reregister: invariant 4. Called with mu held.
func (k *Consumer) reregister(gen uint64, why error) {
	if gen != k.gen || k.reregistering || k.closed {
		return
	}
	k.warn(why)
	k.dropGeneration()
	k.reregistering = true
	calm := k.reregWait
	if time.Since(k.registeredAt) >= reregisterCalm {
		calm = 0
	}
	if k.reregWait = 2 * calm; k.reregWait < 200*time.Millisecond {
		k.reregWait = 200 * time.Millisecond
	} else if k.reregWait > 5*time.Second {
		k.reregWait = 5 * time.Second
	}
	go func() {
		if calm > 0 {
			select {
			case <-time.After(calm):
			case <-k.done:
			}
		}
		wait := 200 * time.Millisecond
		for !k.isClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := k.register(ctx)
			cancel()
			if err == nil || errors.Is(err, ErrClosed) {
				break
			}
			k.warn(err)
			select {
			case <-time.After(wait):
			case <-k.done:
			}
			if wait *= 2; wait > 5*time.Second {
				wait = 5 * time.Second
			}
			if k.isClosed() {
				break
			}
		}
		k.mu.Lock()
		k.reregistering = false
		k.topUp()
		k.mu.Unlock()
	}()
}

func (k *Consumer) isClosed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

// dropGeneration forgets pulls, queued batches and the in-progress set (mu held).
func (k *Consumer) dropGeneration() {
	for _, p := range k.pulls {
		p.timer.Stop()
	}
	k.pulls = map[uint64]*pull{}
	k.queue = nil
	k.inProgress = map[uint64]*Batch{}
}

func (k *Consumer) heartbeats() {
	for {
		k.mu.Lock()
		ms := k.o.Heartbeat
		if ms == 0 && k.info != nil {
			ms = time.Duration(k.info.HeartbeatMs) * time.Millisecond
		}
		k.mu.Unlock()
		if ms < 0 {
			return
		}
		if ms == 0 {
			ms = 2 * time.Second
		}
		select {
		case <-k.done:
			return
		case <-time.After(ms):
		}
		k.mu.Lock()
		if !k.closed && !k.reregistering {
			ids := make([]uint64, 0, len(k.inProgress))
			for id := range k.inProgress {
				ids = append(ids, id)
			}
			if err := k.c.nc.Publish(k.info.HeartbeatSubject, heartbeatEncode(ids)); err != nil {
				k.warn(err)
			}
		}
		k.mu.Unlock()
	}
}

// topUp keeps Prefetch pulls or batches out (invariant 2; mu held).
func (k *Consumer) topUp() {
	if k.closed || k.reregistering || k.paused || k.c.nc.IsClosed() {
		return
	}
	for len(k.pulls)+len(k.queue) < k.o.Prefetch {
		k.seq++
		seq, gen := k.seq, k.gen
		margin := time.Duration(k.info.HeartbeatMs) * time.Millisecond
		if margin < time.Second {
			margin = time.Second
		}
		p := &pull{gen: gen}
		p.timer = time.AfterFunc(k.o.PullExpires+margin, func() { k.pullLost(seq, gen) })
		k.pulls[seq] = p
		expires := uint32(k.o.PullExpires / time.Millisecond)
		reply := k.box + "." + strconv.FormatUint(gen, 10) + "." + strconv.FormatUint(seq, 10)
		if err := k.c.nc.PublishRequest(k.info.PullSubject, reply, pullEncode(1, expires)); err != nil {
			k.warn(err)
			return
		}
	}
}

func (k *Consumer) pullLost(seq, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.pulls[seq]; !ok {
		return
	}
	delete(k.pulls, seq)
	if gen == k.gen {
		k.probe(gen)
	}
}

// probe: invariant 3 (mu held; the request runs on its own goroutine).
func (k *Consumer) probe(gen uint64) {
	if k.probing || k.closed || k.reregistering {
		return
	}
	k.probing = true
	subject := k.info.AckSubject
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), k.o.AckTimeout)
		msg, err := k.c.nc.RequestWithContext(ctx, subject, (&wireAck{}).encode())
		cancel()
		code := ""
		if err != nil {
			code = "timeout"
			if errors.Is(err, nats.ErrNoResponders) {
				code = "no_responders"
			}
		} else if r, derr := ackReplyDecode(msg.Data); derr == nil {
			code = r.Code
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		k.probing = false
		if code == "unknown_consumer" || code == "timeout" || code == "no_responders" {
			k.reregister(gen, &Error{Code: code, Text: "a pull ended without any reply; registering again"})
		} else {
			k.topUp()
		}
	}()
}

func (k *Consumer) onMessage(msg *nats.Msg) {
	tail := strings.Split(strings.TrimPrefix(msg.Subject, k.box+"."), ".")
	if len(tail) != 2 {
		return
	}
	gen, _ := strconv.ParseUint(tail[0], 10, 64)
	seq, _ := strconv.ParseUint(tail[1], 10, 64)
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.pulls[seq]; ok {
		p.timer.Stop()
		delete(k.pulls, seq)
	}
	if msg.Header != nil && msg.Header.Get("Status") == "503" {
		// the server's no-responders status: the pull reached nobody (invariant 3)
		if gen == k.gen && !k.reregistering {
			k.probe(gen)
		}
		return
	}
	b, err := batchDecode(msg.Data)
	if err != nil || (b.status == batchOK && len(b.items) == 0) {
		k.warn(&Error{Code: "malformed", Text: "a Batch did not decode, or had status OK and no items"})
		k.topUp()
		return
	}
	if gen != k.gen || k.closed || k.reregistering {
		k.staleReturn(b, gen)
		return
	}
	switch b.status {
	case batchOK:
		batch := &Batch{k: k, gen: gen, ackSubject: k.info.AckSubject, BatchID: b.batchID, Model: b.model,
			Signature: b.signature, Lane: b.lane, PadTo: b.padTo, Items: b.items, settled: map[uint32]bool{}}
		k.inProgress[b.batchID] = batch
		k.queue = append(k.queue, batch)
		select {
		case k.notify <- struct{}{}:
		default:
		}
	case batchError:
		e := errorFromReply(b.error)
		if e.Code == "unknown_consumer" {
			k.reregister(gen, e)
			return
		}
		k.warn(e)
		k.paused = true
		time.AfterFunc(time.Second, func() {
			k.mu.Lock()
			k.paused = false
			k.topUp()
			k.mu.Unlock()
		})
	case batchExpired:
	default:
		k.warn(&Error{Code: "bad_reply", Text: "a Batch with unknown status " + strconv.FormatUint(b.status, 10)})
	}
	k.topUp()
}

// staleReturn: invariant 1 (mu held).
func (k *Consumer) staleReturn(b *wireBatch, gen uint64) {
	if b.status != batchOK || len(b.items) == 0 {
		return
	}
	subject := k.oldAck[gen]
	if gen == k.gen && k.info != nil {
		subject = k.info.AckSubject
	}
	if subject == "" {
		return
	}
	nak := make([]uint32, len(b.items))
	for i := range nak {
		nak[i] = uint32(i)
	}
	k.c.nc.Publish(subject, (&wireAck{batchID: b.batchID, nak: nak}).encode())
}

// Next returns the next batch, waiting until one comes, ctx is done (ctx.Err()) or the consumer
// is closed (ErrClosed).
func (k *Consumer) Next(ctx context.Context) (*Batch, error) {
	for {
		k.mu.Lock()
		if len(k.queue) > 0 {
			b := k.queue[0]
			k.queue = k.queue[1:]
			k.topUp()
			k.mu.Unlock()
			return b, nil
		}
		closed := k.closed
		k.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		select {
		case <-k.notify:
		case <-k.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops pulling and heartbeating. With bye the daemon returns this consumer's unfinished
// batches at once; without, after dead_after_ms (as after a crash).
func (k *Consumer) Close(ctx context.Context, bye bool) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.dropGeneration()
	close(k.done)
	info := k.info
	k.mu.Unlock()
	var err error
	if bye && info != nil && !k.c.nc.IsClosed() {
		bctx, cancel := context.WithTimeout(ctx, k.o.AckTimeout)
		msg, rerr := k.c.nc.RequestWithContext(bctx, info.ByeSubject, nil)
		cancel()
		if rerr != nil {
			err = natsError(rerr)
		} else if r, derr := ackReplyDecode(msg.Data); derr == nil && r.Error != "" {
			err = errorFromReply(r.Error)
		}
	}
	if !k.c.nc.IsClosed() {
		k.sub.Unsubscribe()
	}
	k.c.mu.Lock()
	delete(k.c.consumers, k)
	k.c.mu.Unlock()
	return err
}

// Batch is a delivered batch: items of one model and one shape, padded to PadTo.
type Batch struct {
	k          *Consumer
	gen        uint64
	ackSubject string

	BatchID   uint64
	Model     string
	Signature uint64
	Lane      uint32
	PadTo     uint32
	Items     []BatchItem

	mu      sync.Mutex
	settled map[uint32]bool
	done    bool
}

// Done says whether every position is settled or the daemon no longer holds the batch for us.
func (b *Batch) Done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// Ack completes every unsettled position (Ack.all).
func (b *Batch) Ack(ctx context.Context) (*AckReply, error) {
	return b.send(ctx, &wireAck{all: true})
}

// Settle acks and naks by position (0-based); naked items are delivered again.
func (b *Batch) Settle(ctx context.Context, ack, nak []uint32) (*AckReply, error) {
	return b.send(ctx, &wireAck{ack: ack, nak: nak})
}

// Nak returns positions (none given: all) for redelivery.
func (b *Batch) Nak(ctx context.Context, positions ...uint32) (*AckReply, error) {
	if len(positions) == 0 {
		for i := range b.Items {
			positions = append(positions, uint32(i))
		}
	}
	return b.send(ctx, &wireAck{nak: positions})
}

// InProgress extends the ack deadline by ack_wait_ms (Ack.in_progress); settles nothing.
func (b *Batch) InProgress(ctx context.Context) (*AckReply, error) {
	return b.send(ctx, &wireAck{inProgress: true})
}

// Release stops naming the batch in heartbeats: unless settled, the daemon returns it after
// ack_wait_ms.
func (b *Batch) Release() {
	b.k.mu.Lock()
	if b.k.inProgress[b.BatchID] == b {
		delete(b.k.inProgress, b.BatchID)
	}
	b.k.mu.Unlock()
}

// send resends the same Ack while no reply comes (acks are idempotent), until ctx is done or
// AckRetryFor passes; an answer with an error word is an AckReply with Code set, not an error.
func (b *Batch) send(ctx context.Context, a *wireAck) (*AckReply, error) {
	a.batchID = b.BatchID
	msg, err := b.k.c.requestRetry(ctx, b.ackSubject, a.encode(), b.k.o.AckTimeout, b.k.o.AckRetryFor)
	if err != nil {
		return nil, err
	}
	r, err := ackReplyDecode(msg.Data)
	if err != nil {
		return nil, &Error{Code: "bad_reply", Text: "AckReply did not decode"}
	}
	b.mu.Lock()
	switch {
	case r.Code == "unknown_batch" || r.Code == "unknown_consumer":
		b.done = true
	case r.Code == "" && !a.inProgress:
		if a.all {
			for i := range b.Items {
				b.settled[uint32(i)] = true
			}
		}
		for _, p := range append(append([]uint32{}, a.ack...), a.nak...) {
			b.settled[p] = true
		}
		b.done = len(b.settled) >= len(b.Items)
	}
	done := b.done
	b.mu.Unlock()
	if done {
		b.Release()
	}
	if r.Code == "unknown_consumer" {
		b.k.mu.Lock()
		b.k.reregister(b.gen, errorFromReply(r.Error))
		b.k.mu.Unlock()
	}
	return r, nil
}

// goload: a saturating end-to-end load client for lanesched, written from subjects.md alone
// (its own protobuf encoding on protowire and its own XXH64; nothing of clients/, codec/ or
// tools/), and a JetStream work queue driven the way a NATS user would (one async publisher
// with a window of pending acks, pull consumers with Fetch, an Ack per message), on the same
// items: 2 models, Zipf shapes, tokens log-uniform 50-2,000, 512-byte payloads, 64-item Submits.
//
// It exits 3 when an item was not accepted, never delivered, delivered twice (counted through a
// quiet second after the last ack), left in the daemon or the stream, or when a publish or ack
// failed or the run did not finish in -timeout; 1 when it could not set up. run.sh runs both systems on a fresh
// nats-server and daemon (CTest go_load_client; docs/throughput.md, "The independent clients").
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

var (
	mode       = flag.String("mode", "ls", "ls (lanesched) or js (JetStream)")
	url        = flag.String("url", "nats://127.0.0.1:4222", "NATS URL")
	prefix     = flag.String("prefix", "lanes", "lanesched prefix")
	nItems     = flag.Int("n", 200000, "items")
	perSubmit  = flag.Int("per", 64, "items per Submit")
	window     = flag.Int("window", 64, "Submits in flight (ls) / PublishAsync pending (js)")
	nModels    = flag.Int("models", 2, "models")
	nShapes    = flag.Int("shapes", 8, "shapes per model")
	nConsumers = flag.Int("consumers", 8, "consumers")
	payloadSz  = flag.Int("payload", 512, "payload bytes")
	pullBatch  = flag.Int("pullbatches", 4, "ls: Pull.max_batches")
	pullsAhead = flag.Int("pullsahead", 2, "ls: open pulls kept per consumer")
	maxBatch   = flag.Int("maxbatch", 64, "ls: Register.max_batch_size")
	maxTokens  = flag.Int("maxtokens", 131072, "ls: Register.max_batch_tokens")
	fetch      = flag.Int("fetch", 64, "js: Fetch batch")
	timeout    = flag.Duration("timeout", 180*time.Second, "give up after")
	label      = flag.String("label", "", "label printed in the result line")
	seed       = flag.Int64("seed", time.Now().UnixNano(), "random seed")
)

func main() {
	flag.Parse()
	// Every phase (submits and their retries, registrations, publishes) ends within -timeout,
	// or the run fails as not finished; the drain's own wait below reports which items stayed.
	time.AfterFunc(*timeout+30*time.Second, func() {
		fmt.Fprintf(os.Stderr, "goload: the run did not end within -timeout %v\n", *timeout)
		os.Exit(3)
	})
	switch *mode {
	case "ls":
		runLS()
	case "js":
		runJS()
	default:
		fmt.Fprintln(os.Stderr, "bad -mode")
		os.Exit(2)
	}
}

func logUniformTokens(r *rand.Rand) uint32 {
	lo, hi := math.Log(50), math.Log(2000)
	return uint32(math.Round(math.Exp(lo + r.Float64()*(hi-lo))))
}

func connect(name string) *nats.Conn {
	nc, err := nats.Connect(*url, nats.Name(name), nats.MaxReconnects(-1),
		nats.ReconnectBufSize(64<<20), nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, e error) {
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			fmt.Fprintf(os.Stderr, "nats async error on %s (%s): %v\n", name, subj, e)
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	return nc
}

// ---------------------------------------------------------------- lanesched

type lsStats struct {
	accepted, duplicate, rejected, resent                atomic.Int64
	submitErr                                            atomic.Int64
	batches, itemsDelivered, redelivered                 atomic.Int64
	acked, ackErrs, ackUnknown                           atomic.Int64
	pullsSent, pullsExpired, pullsErr, pullsLocalTimeout atomic.Int64
	emptyBatches                                         atomic.Int64
}

var (
	st        lsStats
	delivered []uint32 // per seq
	accFlag   []uint32 // per seq: 1 once ACCEPTED/DUPLICATE
	nonce     uint32
	rejReason sync.Map
	errReason sync.Map
)

func bump(m *sync.Map, k string) {
	v, _ := m.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func dumpMap(m *sync.Map) string {
	var parts []string
	m.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func seqOf(id []byte) (int, bool) {
	if len(id) != 8 || binary.BigEndian.Uint32(id) != nonce {
		return 0, false
	}
	s := int(binary.BigEndian.Uint32(id[4:]))
	return s, s < len(delivered)
}

type pendingSubmit struct {
	body   []byte
	subj   string
	sentAt time.Time
	seqs   []int
}

func runLS() {
	r := rand.New(rand.NewSource(*seed))
	nonce = r.Uint32()
	N := *nItems
	delivered = make([]uint32, N)
	accFlag = make([]uint32, N)
	models := make([]string, *nModels)
	sigs := make([][]uint64, *nModels)
	for m := range models {
		models[m] = fmt.Sprintf("model-%d", m)
		sigs[m] = make([]uint64, *nShapes)
		for s := 0; s < *nShapes; s++ {
			sigs[m][s], _ = shapeSignature([]string{
				fmt.Sprintf("You are assistant %d of %s.", s, models[m]), fmt.Sprintf("Few-shot block %d.", s)})
		}
	}
	payload := make([]byte, *payloadSz)
	r.Read(payload)

	// pre-build all Submit bodies (so encoding is not on the clock)
	type sub struct {
		subj string
		body []byte
		seqs []int
	}
	var subs []sub
	zipf := rand.NewZipf(r, 1.1, 1, uint64(*nShapes-1))
	for seq, k := 0, 0; seq < N; k++ {
		m := k % *nModels
		cnt := *perSubmit
		if N-seq < cnt {
			cnt = N - seq
		}
		items := make([]workItem, cnt)
		seqs := make([]int, cnt)
		for i := range items {
			id := make([]byte, 8)
			binary.BigEndian.PutUint32(id, nonce)
			binary.BigEndian.PutUint32(id[4:], uint32(seq))
			items[i] = workItem{id: id, model: models[m], signature: sigs[m][zipf.Uint64()],
				tokens: logUniformTokens(r), payload: payload}
			seqs[i] = seq
			seq++
		}
		subs = append(subs, sub{*prefix + ".submit." + models[m], encodeSubmit(items), seqs})
	}

	var done atomic.Bool
	allDone := make(chan struct{})
	var finishOnce sync.Once
	var ackedTarget atomic.Int64
	ackedTarget.Store(int64(N))

	// consumers
	var cwg sync.WaitGroup
	ready := make(chan struct{}, *nConsumers)
	var cons []*lsConsumer
	for i := 0; i < *nConsumers; i++ {
		c := &lsConsumer{idx: i, model: models[i%len(models)], done: &done}
		c.onAcked = func() {
			if st.acked.Load() >= ackedTarget.Load() {
				finishOnce.Do(func() { close(allDone) })
			}
		}
		cons = append(cons, c)
		cwg.Add(1)
		go func() { defer cwg.Done(); c.run(ready) }()
	}
	for i := 0; i < *nConsumers; i++ {
		<-ready
	}

	// producer
	pnc := connect("goload-producer")
	inbox := nats.NewInbox()
	slots := make(chan struct{}, *window)
	var pmu sync.Mutex
	pending := map[string]*pendingSubmit{}
	var submitsDone sync.WaitGroup
	var lastReply atomic.Int64
	transient := map[string]bool{"queue_full": true, "too_many_shapes": true, "too_many_models": true,
		"store_full": true, "store_error": true, "not_owner": true, "input_too_long": true}
	var retryQ []sub
	var retryMu sync.Mutex
	_, err := pnc.Subscribe(inbox+".*", func(msg *nats.Msg) {
		pmu.Lock()
		ps := pending[msg.Subject]
		delete(pending, msg.Subject)
		pmu.Unlock()
		if ps == nil {
			return // late reply to a resent submit
		}
		rep, err := decodeSubmitReply(msg.Data)
		if err != nil || rep.err != "" || len(rep.results) != len(ps.seqs) {
			st.submitErr.Add(1)
			bump(&rejReason, "whole:"+codeWord(rep.err))
			retryMu.Lock()
			retryQ = append(retryQ, sub{ps.subj, ps.body, ps.seqs})
			retryMu.Unlock()
		} else {
			var again []int
			for i, res := range rep.results {
				seq, ok := seqOf(res.id)
				if !ok || seq != ps.seqs[i] {
					bump(&rejReason, "id_mismatch")
					continue
				}
				switch res.status {
				case 0:
					st.accepted.Add(1)
					atomic.StoreUint32(&accFlag[seq], 1)
				case 1:
					st.duplicate.Add(1)
					atomic.StoreUint32(&accFlag[seq], 1)
				default:
					st.rejected.Add(1)
					bump(&rejReason, fmt.Sprintf("%d:%s", res.status, res.reason))
					if transient[res.reason] {
						again = append(again, seq)
					}
				}
			}
			if len(again) > 0 {
				// a resend of the whole Submit with the same ids: accepted ones come back DUPLICATE
				retryMu.Lock()
				retryQ = append(retryQ, sub{ps.subj, ps.body, ps.seqs})
				retryMu.Unlock()
			}
		}
		lastReply.Store(time.Now().UnixNano())
		<-slots
		submitsDone.Done()
	})
	if err != nil {
		panic(err)
	}
	pnc.Flush()

	var reqSeq int64
	send := func(s sub) {
		slots <- struct{}{}
		submitsDone.Add(1)
		reqSeq++
		rs := fmt.Sprintf("%s.%d", inbox, reqSeq)
		pmu.Lock()
		pending[rs] = &pendingSubmit{s.body, s.subj, time.Now(), s.seqs}
		pmu.Unlock()
		if err := pnc.PublishRequest(s.subj, rs, s.body); err != nil {
			fmt.Fprintln(os.Stderr, "publish:", err)
		}
	}
	// resend submits with no reply after 10 s (same ids)
	go func() {
		for !done.Load() {
			time.Sleep(500 * time.Millisecond)
			now := time.Now()
			pmu.Lock()
			for k, ps := range pending {
				if now.Sub(ps.sentAt) > 10*time.Second {
					ps.sentAt = now
					st.resent.Add(1)
					pnc.PublishRequest(ps.subj, k, ps.body)
				}
			}
			pmu.Unlock()
		}
	}()

	t0 := time.Now()
	for _, s := range subs {
		send(s)
	}
	for {
		submitsDone.Wait()
		retryMu.Lock()
		q := retryQ
		retryQ = nil
		retryMu.Unlock()
		if len(q) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
		for _, s := range q {
			send(s)
		}
	}
	tSubmit := time.Since(t0)
	var accN int64
	for i := range accFlag {
		if accFlag[i] == 1 {
			accN++
		}
	}
	ackedTarget.Store(accN)
	if st.acked.Load() >= ackedTarget.Load() {
		finishOnce.Do(func() { close(allDone) })
	}
	stuck := false
	select {
	case <-allDone:
	case <-time.After(*timeout - time.Since(t0)):
		stuck = true
	}
	el := time.Since(t0)
	// A quiet second with the consumers still pulling: a copy of an item delivered late (a
	// second stored copy, a redelivery) is counted before the check.
	time.Sleep(time.Second)
	done.Store(true)

	// verification
	var lost, dups, notAcc int
	for i := 0; i < N; i++ {
		d := atomic.LoadUint32(&delivered[i])
		if accFlag[i] == 0 {
			notAcc++
		}
		if d == 0 {
			lost++
		} else if d > 1 {
			dups++
		}
	}
	for _, c := range cons {
		c.bye()
	}
	statsJSON, left := fetchStats(pnc)
	rate := float64(N) / el.Seconds()
	fmt.Printf("RESULT system=lanesched %s n=%d shapes=%d consumers=%d window=%d per=%d elapsed=%.3fs items_per_s=%.0f submit_phase=%.3fs stuck=%v\n",
		*label, N, *nShapes, *nConsumers, *window, *perSubmit, el.Seconds(), rate, tSubmit.Seconds(), stuck)
	fmt.Printf("  verify: accepted=%d duplicate_replies=%d rejected=%d not_accepted=%d resent_submits=%d whole_submit_errors=%d | delivered_items=%d redelivered(deliveries>1)=%d never_delivered=%d delivered_more_than_once=%d | acked=%d ack_errors=%d ack_unknown=%d | batches=%d empty_batches=%d pulls=%d expired=%d pull_errors=%d local_pull_timeouts=%d\n",
		st.accepted.Load(), st.duplicate.Load(), st.rejected.Load(), notAcc, st.resent.Load(), st.submitErr.Load(),
		st.itemsDelivered.Load(), st.redelivered.Load(), lost, dups, st.acked.Load(), st.ackErrs.Load(), st.ackUnknown.Load(),
		st.batches.Load(), st.emptyBatches.Load(), st.pullsSent.Load(), st.pullsExpired.Load(), st.pullsErr.Load(), st.pullsLocalTimeout.Load())
	if s := dumpMap(&rejReason); s != "" {
		fmt.Printf("  rejections: %s\n", s)
	}
	if s := dumpMap(&errReason); s != "" {
		fmt.Printf("  errors: %s\n", s)
	}
	if b := st.batches.Load(); b > 0 {
		fmt.Printf("  mean batch size %.1f\n", float64(st.itemsDelivered.Load())/float64(b))
	}
	fmt.Printf("  daemon stats: %s\n", statsJSON)
	pnc.Close()
	cwg.Wait()
	if left != 0 {
		fmt.Printf("  the daemon still holds %d items (items_queued + pending_items, or no stats)\n", left)
	}
	if stuck || lost > 0 || dups > 0 || notAcc > 0 || left != 0 {
		os.Exit(3)
	}
}

// fetchStats: the daemon's counters as one line, and the items it still holds (queued or in
// flight; -1 when the stats could not be read).
func fetchStats(nc *nats.Conn) (string, int64) {
	m, err := nc.Request(*prefix+".stats", nil, 5*time.Second)
	if err != nil {
		return "stats error: " + err.Error(), -1
	}
	var doc struct {
		Counters map[string]any `json:"counters"`
	}
	if err := json.Unmarshal(m.Data, &doc); err != nil {
		return "stats error: " + err.Error(), -1
	}
	var left int64
	for _, k := range []string{"items_queued", "pending_items"} {
		v, ok := doc.Counters[k].(float64)
		if !ok {
			return "stats error: no counters." + k, -1
		}
		left += int64(v)
	}
	keys := []string{"items_received", "items_routed", "items_completed", "items_returned", "duplicates", "rejected",
		"batches", "merged_batches", "fills_held", "shape_switches", "starvation_preemptions", "padded_tokens", "real_tokens",
		"wait_p50_ns", "wait_p99_ns", "wait_max_ns", "publish_failures", "dropped_messages", "unknown_batch", "unknown_consumer",
		"batches_expired_ack_deadline", "items_queued", "pending_items"}
	var parts []string
	for _, k := range keys {
		if v, ok := doc.Counters[k]; ok {
			b, _ := json.Marshal(v)
			parts = append(parts, k+"="+string(b))
		}
	}
	return strings.Join(parts, " "), left
}

type pullState struct {
	left     int
	deadline time.Time
}

type lsConsumer struct {
	idx     int
	model   string
	nc      *nats.Conn
	reg     registered
	mu      sync.Mutex
	pulls   map[string]*pullState
	pullSeq int
	inbox   string
	done    *atomic.Bool
	onAcked func()
	expMs   uint32
}

func (c *lsConsumer) register() {
	for {
		m, err := c.nc.Request(*prefix+".register",
			encodeRegister(c.model, uint32(*maxBatch), uint32(*maxTokens), fmt.Sprintf("goload-%d", c.idx)), 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "register:", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		r, err := decodeRegistered(m.Data)
		if err != nil || r.err != "" {
			fmt.Fprintf(os.Stderr, "register refused: %v %q\n", err, r.err)
			bump(&errReason, "register:"+codeWord(r.err))
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if r.protocolVersion > 1 {
			fmt.Fprintf(os.Stderr, "warning: daemon speaks protocol %d, client written for 1\n", r.protocolVersion)
		}
		c.mu.Lock()
		c.reg = r
		c.pulls = map[string]*pullState{}
		c.mu.Unlock()
		return
	}
}

// openPull must be called with c.mu held.
func (c *lsConsumer) openPull() {
	c.pullSeq++
	subj := fmt.Sprintf("%s.p.%d", c.inbox, c.pullSeq)
	c.pulls[subj] = &pullState{left: *pullBatch,
		deadline: time.Now().Add(time.Duration(c.expMs)*time.Millisecond + time.Duration(c.reg.heartbeatMs)*time.Millisecond + time.Second)}
	st.pullsSent.Add(1)
	c.nc.PublishRequest(c.reg.pull, subj, encodePull(uint32(*pullBatch), c.expMs))
}

func (c *lsConsumer) topUp() {
	for len(c.pulls) < *pullsAhead && !c.done.Load() {
		c.openPull()
	}
}

func (c *lsConsumer) run(ready chan<- struct{}) {
	c.nc = connect(fmt.Sprintf("goload-consumer-%d", c.idx))
	c.inbox = nats.NewInbox()
	c.expMs = 5000
	c.register()
	var b batch
	ackInbox := c.inbox + ".a"
	c.nc.Subscribe(ackInbox, func(m *nats.Msg) {
		r, err := decodeAckReply(m.Data)
		if err != nil || r.err != "" {
			st.ackErrs.Add(1)
			bump(&errReason, "ack:"+codeWord(r.err))
		}
		st.ackUnknown.Add(int64(r.unknown))
		st.acked.Add(int64(r.acked))
		c.onAcked()
	})
	sub, _ := c.nc.Subscribe(c.inbox+".p.*", func(m *nats.Msg) {
		if len(m.Data) == 0 && m.Header != nil {
			bump(&errReason, "pull:no_responders")
		}
		if err := decodeBatch(m.Data, &b); err != nil {
			bump(&errReason, "pull:undecodable")
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		ps := c.pulls[m.Subject]
		if b.status == 0 && len(b.items) > 0 && b.batchID != 0 {
			st.batches.Add(1)
			st.itemsDelivered.Add(int64(len(b.items)))
			for _, it := range b.items {
				if seq, ok := seqOf(it.id); ok {
					atomic.AddUint32(&delivered[seq], 1)
				} else {
					bump(&errReason, "foreign_item")
				}
				if it.deliveries > 1 {
					st.redelivered.Add(1)
				}
			}
			c.nc.PublishRequest(c.reg.ack, ackInbox, encodeAckAll(b.batchID))
			if ps != nil {
				ps.left--
				if ps.left <= 0 {
					delete(c.pulls, m.Subject)
				}
			}
		} else {
			switch b.status {
			case 0:
				st.emptyBatches.Add(1)
			case 1:
				st.pullsExpired.Add(1)
			default:
				st.pullsErr.Add(1)
				bump(&errReason, "pull:"+codeWord(b.err))
				if codeWord(b.err) == "unknown_consumer" {
					go func() { c.register(); c.mu.Lock(); c.topUp(); c.mu.Unlock() }()
				}
			}
			delete(c.pulls, m.Subject)
		}
		c.topUp()
	})
	sub.SetPendingLimits(-1, -1)
	c.nc.Flush()
	c.mu.Lock()
	c.topUp()
	c.mu.Unlock()
	ready <- struct{}{}
	// heartbeat and local pull timeouts
	hb := time.Duration(c.reg.heartbeatMs) * time.Millisecond
	if hb <= 0 {
		hb = 2 * time.Second
	}
	tick := time.NewTicker(200 * time.Millisecond)
	lastHB := time.Now()
	for !c.done.Load() {
		<-tick.C
		now := time.Now()
		c.mu.Lock()
		if now.Sub(lastHB) >= hb {
			c.nc.Publish(c.reg.hb, nil)
			lastHB = now
		}
		for k, ps := range c.pulls {
			if now.After(ps.deadline) {
				st.pullsLocalTimeout.Add(1)
				delete(c.pulls, k)
			}
		}
		c.topUp()
		c.mu.Unlock()
	}
	tick.Stop()
}

func (c *lsConsumer) bye() {
	c.nc.Request(c.reg.bye, nil, 2*time.Second)
	c.nc.Flush()
	c.nc.Close()
}

package lanes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protowire"
)

const system = "You are a helpful assistant."

// subjects.md, "Shape signatures and test vectors"
func TestShapeVectors(t *testing.T) {
	three := []string{system, "Answer in French.", "Tools: search, calculator."}
	// 109 bytes: XXH64's path for inputs of 32 bytes and more, as the five components' 40 bytes
	long := "Context: the user is a customer of an online bookshop and asks about orders, " +
		"deliveries, returns and refunds."
	cases := []struct {
		got, want uint64
	}{
		{ShapeSign(), 0xef46db3751d8e999},
		{ShapeHash(system), 0xe4a58ad40a48973b},
		{ShapeSign(system), 0x91f47f2f45b64efd},
		{ShapeHash(three[1]), 0x6fd2a283f58d194e},
		{ShapeHash(three[2]), 0x425afd5d136c7e5e},
		{ShapeSign(three...), 0xa340b41b91cca53d},
		{ShapeSign(three[2], three[1], three[0]), 0xaf6225c57a35ec89},
		{ShapeHash(long), 0x5e1f688af88d97ab},
		{ShapeSign(append(three, long, "Be brief.")...), 0x6a17c9adc0a244e4},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("vector %d: %#x, want %#x", i, c.got, c.want)
		}
	}
	if s, _ := ShapeParse("0x91f47f2f45b64efd"); s != 0x91f47f2f45b64efd || ShapeFormat(s) != "0x91f47f2f45b64efd" {
		t.Errorf("parse/format: %#x", s)
	}
	for _, bad := range []string{"", "0x0", "0x", "12345678901234567", "xyz"} {
		if _, err := ShapeParse(bad); err == nil {
			t.Errorf("ShapeParse(%q) accepted", bad)
		}
	}
}

// codec/validate.c: codec_model_check
func TestCheckModel(t *testing.T) {
	for _, good := range []string{"llama", "llama-3.1", "meta.llama-3.1-8b", "modèle"} {
		if err := CheckModel(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	cases := map[string]string{"": "bad_model", "bad model": "bad_model_name", "a*": "bad_model_name",
		"a.>": "bad_model_name", ".a": "bad_model_name", "a.": "bad_model_name", "a..b": "bad_model_name",
		"a\tb": "bad_model_name", strings.Repeat("x", 256): "model_too_long", "a\x7f": "bad_model_name",
		"m\xff": "bad_model_name", "a\x00b": "bad_model_name"}
	for m, word := range cases {
		if err := CheckModel(m); !IsCode(err, word) {
			t.Errorf("%q: %v, want %s", m, err, word)
		}
	}
}

// The wire bytes of the messages, field by field as codec/lanes.proto numbers them.
func TestCodecBytes(t *testing.T) {
	reg := (&wireRegister{model: "llama", maxBatchSize: 8, maxBatchTokens: 4096, name: "g", batchFixedUs: 1, tokenNs: 2, cacheShapes: 3}).encode()
	want := []byte{0x0a, 5, 'l', 'l', 'a', 'm', 'a', 0x10, 8, 0x18, 0x80, 0x20, 0x2a, 1, 'g', 0x30, 1, 0x38, 2, 0x40, 3}
	if !bytes.Equal(reg, want) {
		t.Errorf("Register % x", reg)
	}
	it := (&wireItem{id: []byte("a"), model: "m", componentHashes: []uint64{1}, signature: 2, tokens: 3, payload: []byte("p"),
		replyTo: "r", createdUnixNs: 4, prefixTokens: 5, maxWaitMs: 6}).encode()
	want = []byte{0x0a, 1, 'a', 0x12, 1, 'm', 0x1a, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0, 0,
		0x28, 3, 0x32, 1, 'p', 0x3a, 1, 'r', 0x40, 4, 0x48, 5, 0x50, 6}
	if !bytes.Equal(it, want) {
		t.Errorf("WorkItem % x", it)
	}
	ack := (&wireAck{batchID: 7, ack: []uint32{0, 1}, nak: []uint32{3}, inProgress: true, all: true}).encode()
	want = []byte{0x08, 7, 0x10, 1, 0x1a, 2, 0, 1, 0x22, 1, 3, 0x28, 1}
	if !bytes.Equal(ack, want) {
		t.Errorf("Ack % x", ack)
	}
	// A Batch with an unknown field 99 (skipped) and one item.
	b, err := batchDecode([]byte{0x08, 9, 0x12, 1, 'm', 0x19, 1, 0, 0, 0, 0, 0, 0, 0x80, 0x28, 16,
		0x32, 12, 0x0a, 1, 'x', 0x10, 5, 0x22, 1, 'r', 0x28, 2, 0x30, 9, 0x98, 0x06, 1})
	if err != nil || b.batchID != 9 || b.signature != 0x8000000000000001 || b.padTo != 16 || len(b.items) != 1 ||
		string(b.items[0].ID) != "x" || b.items[0].Tokens != 5 || b.items[0].ReplyTo != "r" || b.items[0].Deliveries != 2 ||
		b.items[0].PrefixTokens != 9 {
		t.Errorf("Batch %+v %v", b, err)
	}
	if _, err := batchDecode([]byte{0x32, 9, 1}); err == nil {
		t.Error("a truncated Batch decoded")
	}
}

// The field numbers above are the schema's: every "type name = N;" line of codec/lanes.proto
// that this package writes or reads.
func TestSchemaFields(t *testing.T) {
	proto, err := os.ReadFile("../../codec/lanes.proto")
	if err != nil {
		t.Skip("codec/lanes.proto not beside this module")
	}
	for _, line := range []string{"bytes id = 1;", "string model = 2;", "repeated fixed64 component_hashes = 3;",
		"fixed64 signature = 4;", "uint32 tokens = 5;", "bytes payload = 6;", "string reply_to = 7;",
		"uint64 created_unix_ns = 8;", "uint32 prefix_tokens = 9;", "uint32 max_wait_ms = 10;",
		"uint32 batch_fixed_us = 6;", "uint32 token_ns = 7;", "uint32 cache_shapes = 8;",
		"uint32 protocol_version = 10;", "uint32 deliveries = 5;", "uint32 prefix_tokens = 6;", "bool in_progress = 5;", "repeated uint64 in_progress = 1;"} {
		if !strings.Contains(string(proto), line) {
			t.Errorf("codec/lanes.proto has no %q", line)
		}
	}
}

func items(n int, prefix string) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{ID: []byte(fmt.Sprintf("%s%d", prefix, i)), Tokens: uint32(10 + i), Components: []string{system},
			Payload: []byte(fmt.Sprintf("p%d", i)), PrefixTokens: 3, MaxWaitMs: 100}
	}
	return out
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func take(t *testing.T, k *Consumer, n int, d time.Duration) []*Batch {
	var got []*Batch
	ctx := ctxT(t, d)
	for count := 0; count < n; {
		b, err := k.Next(ctx)
		if err != nil {
			t.Fatalf("only %d of %d items came: %v", count, n, err)
		}
		got = append(got, b)
		count += len(b.Items)
	}
	return got
}

func TestSubmitVerdicts(t *testing.T) {
	e := startEnv(t)
	c := e.client(Options{})
	r, err := c.Submit(ctxT(t, 10*time.Second), "llama", append(items(3, "j"),
		Item{ID: []byte("j0"), Tokens: 5}, Item{ID: []byte("zero")}, Item{Tokens: 5},
		Item{ID: []byte("mismatch"), Tokens: 5, Signature: 1, ComponentHashes: []uint64{ShapeHash(system)}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ok", "ok", "ok", "duplicate", "zero_tokens", "bad_id", "signature_mismatch"}
	for i, w := range want {
		if r.Results[i].Reason != w {
			t.Errorf("item %d: %s, want %s", i, r.Results[i].Reason, w)
		}
	}
	if r.Accepted != 3 || r.Duplicate != 1 || r.Rejected != 3 {
		t.Errorf("counts %+v", r)
	}
	start := time.Now()
	for m, w := range map[string]string{"": "bad_model", "bad model": "bad_model_name"} {
		if _, err := c.Submit(ctxT(t, 5*time.Second), m, items(1, "x")); !IsCode(err, w) {
			t.Errorf("submit %q: %v", m, err)
		}
		if _, err := c.Consumer(ctxT(t, 5*time.Second), ConsumerOptions{Model: m, MaxBatchSize: 1, MaxBatchTokens: 1}); !IsCode(err, w) {
			t.Errorf("consumer %q: %v", m, err)
		}
	}
	if time.Since(start) > time.Second {
		t.Errorf("bad model names took %v", time.Since(start))
	}
	if _, err := c.Consumer(ctxT(t, 5*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 1, MaxBatchTokens: 1, Name: strings.Repeat("n", 300)}); !IsCode(err, "name_too_long") {
		t.Errorf("long name: %v", err)
	}
}

func TestConsumeSettle(t *testing.T) {
	e := startEnv(t)
	c := e.client(Options{InboxPrefix: "_INBOX_bob"})
	if _, err := c.Submit(ctxT(t, 10*time.Second), "llama", items(4, "j")); err != nil {
		t.Fatal(err)
	}
	k, err := c.Consumer(ctxT(t, 10*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 8, MaxBatchTokens: 4096,
		BatchFixedUs: 2500, TokenNs: 40, CacheShapes: 3, Name: "go-0"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.box, "_INBOX_bob.") || !strings.HasPrefix(c.NewInbox(), "_INBOX_bob.") {
		t.Errorf("inbox %s", k.box)
	}
	ctx := ctxT(t, 20*time.Second)
	b := take(t, k, 4, 10*time.Second)[0]
	if b.PadTo != 16 || b.Signature != ShapeSign(system) || string(b.Items[3].Payload) != "p3" {
		t.Errorf("batch %+v", b)
	}
	if r, err := b.InProgress(ctx); err != nil || r.Code != "" {
		t.Errorf("in progress %v %v", r, err)
	}
	if r, _ := b.Settle(ctx, []uint32{0}, []uint32{9}); r.Code != "unknown_position" {
		t.Errorf("bad position: %+v", r)
	}
	if r, _ := b.Settle(ctx, []uint32{0, 1}, []uint32{3}); r.Acked != 2 || r.Returned != 1 {
		t.Errorf("settle: %+v", r)
	}
	again := take(t, k, 1, 10*time.Second)[0]
	if string(again.Items[0].ID) != "j3" || again.Items[0].Deliveries != 2 {
		t.Errorf("redelivery %+v", again.Items[0])
	}
	if r, _ := again.Ack(ctx); r.Acked != 1 {
		t.Errorf("ack %+v", r)
	}
	if r, _ := again.Ack(ctx); r.Code != "unknown_batch" {
		t.Errorf("ack again %+v", r)
	}
	if r, _ := b.Ack(ctx); r.Acked != 1 || !b.Done() {
		t.Errorf("last %+v", r)
	}
	s, _ := c.Stats(ctx)
	for _, x := range s["consumers"].([]any) {
		m := x.(map[string]any)
		if m["name"] == "go-0" && (m["cost_fixed_us"].(float64) != 2500 || m["cost_token_ns"].(float64) != 40 || m["cache_shapes"].(float64) != 3) {
			t.Errorf("declared cost %v", m)
		}
	}
	cn := e.counters()
	if cn["tokens_received"] != cn["tokens_completed"] {
		t.Errorf("tokens %v != %v", cn["tokens_received"], cn["tokens_completed"])
	}
	if err := k.Close(ctx, true); err != nil {
		t.Errorf("bye: %v", err)
	}
	if _, err := k.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("next after close: %v", err)
	}
}

func restartCase(t *testing.T, sig syscall.Signal) {
	e := startEnv(t, "--dead-after-ms", "1500", "--heartbeat-ms", "300")
	c := e.client(Options{SubmitRetryFor: 20 * time.Second})
	var warnings []string
	k, err := c.Consumer(ctxT(t, 10*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 8, MaxBatchTokens: 4096,
		PullExpires: time.Second, OnWarning: func(err error) { warnings = append(warnings, err.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	first := k.ID()
	e.daemonStop(sig)
	time.Sleep(1500 * time.Millisecond)
	e.daemonStart()
	if _, err := c.Submit(ctxT(t, 20*time.Second), "llama", items(3, "after")); err != nil {
		t.Fatal(err)
	}
	got := take(t, k, 3, 20*time.Second)
	for _, b := range got {
		if r, err := b.Ack(ctxT(t, 10*time.Second)); err != nil || r.Code != "" {
			t.Errorf("ack %v %v", r, err)
		}
	}
	if k.ID() == first || k.Registrations() < 2 {
		t.Errorf("not registered again: %s %d", k.ID(), k.Registrations())
	}
	t.Logf("warnings: %v", warnings)
}

func TestDaemonRestart(t *testing.T) { restartCase(t, syscall.SIGTERM) }
func TestDaemonCrash(t *testing.T)   { restartCase(t, syscall.SIGKILL) }

func TestSubmitRetriesSameIDs(t *testing.T) {
	e := startEnv(t)
	c := e.client(Options{SubmitTimeout: time.Second})
	if _, err := c.Submit(ctxT(t, 10*time.Second), "llama", items(2, "j")); err != nil {
		t.Fatal(err)
	}
	e.daemonStop(syscall.SIGTERM)
	if _, err := c.Submit(ctxT(t, 300*time.Millisecond), "llama", items(1, "x")); !IsCode(err, "no_responders") && !IsCode(err, "timeout") {
		t.Errorf("no daemon: %v", err)
	}
	time.AfterFunc(time.Second, e.daemonStart)
	r, err := c.Submit(ctxT(t, 30*time.Second), "llama", items(4, "j"))
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []string{"duplicate", "duplicate", "ok", "ok"} {
		if r.Results[i].Reason != w {
			t.Errorf("item %d: %s, want %s", i, r.Results[i].Reason, w)
		}
	}
}

func TestDeclaredDeadRegistersAgain(t *testing.T) {
	e := startEnv(t, "--dead-after-ms", "1500", "--heartbeat-ms", "300")
	c := e.client(Options{})
	k, err := c.Consumer(ctxT(t, 10*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 8, MaxBatchTokens: 4096,
		Heartbeat: -1, PullExpires: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := k.ID()
	c.Submit(ctxT(t, 10*time.Second), "llama", items(2, "j"))
	b := take(t, k, 2, 10*time.Second)[0]
	time.Sleep(2 * time.Second)
	if r, _ := b.Ack(ctxT(t, 5*time.Second)); r.Code != "unknown_consumer" {
		t.Errorf("ack of a dead consumer: %+v", r)
	}
	c.Submit(ctxT(t, 10*time.Second), "llama", items(2, "later"))
	got := take(t, k, 4, 20*time.Second)
	n := 0
	for _, g := range got {
		n += len(g.Items)
	}
	if k.ID() == first || n != 4 {
		t.Errorf("id %s (was %s), %d items", k.ID(), first, n)
	}
}

// A pull that reaches no daemon is answered by the server's no-responders status: a lost pull,
// never a batch; the consumer asks, gets no answer and registers again once the daemon is back.
func TestLostPullNoResponders(t *testing.T) {
	e := startEnv(t)
	c := e.client(Options{})
	warned := make(chan string, 16)
	k, err := c.Consumer(ctxT(t, 10*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 8, MaxBatchTokens: 4096,
		PullExpires: 200 * time.Millisecond, OnWarning: func(err error) {
			select {
			case warned <- err.Error():
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.daemonStop(syscall.SIGTERM)
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case w := <-warned:
			seen = strings.HasPrefix(w, "no_responders")
		case <-deadline:
			t.Fatal("no no_responders warning while the daemon was away")
		}
	}
	e.daemonStart()
	c.Submit(ctxT(t, 10*time.Second), "llama", items(2, "back"))
	take(t, k, 2, 20*time.Second)
	if k.Registrations() < 2 {
		t.Errorf("registrations %d", k.Registrations())
	}
}

// An item nak'd past --max-deliveries reaches DeadLetters once, decoded, with its reason; an
// ordinary Batch is not taken for a dead letter.
func TestDeadLetters(t *testing.T) {
	e := startEnv(t, "--max-deliveries", "1")
	c := e.client(Options{})
	got := make(chan *DeadLetter, 4)
	sub, err := c.DeadLetters("llama", func(d *DeadLetter, err error) {
		if err != nil {
			t.Errorf("dead letter: %v", err)
			return
		}
		got <- d
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := c.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctxT(t, 10*time.Second), "llama", items(1, "d")); err != nil {
		t.Fatal(err)
	}
	k, err := c.Consumer(ctxT(t, 10*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 8, MaxBatchTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b := take(t, k, 1, 10*time.Second)[0]
	if r, err := b.Settle(ctxT(t, 10*time.Second), nil, []uint32{0}); err != nil || r.Returned != 1 {
		t.Fatalf("nak: %+v %v", r, err)
	}
	select {
	case d := <-got:
		if d.Model != "llama" || d.Signature != ShapeSign(system) || string(d.Item.ID) != "d0" ||
			string(d.Item.Payload) != "p0" || d.Item.Deliveries != 1 || CodeWord(d.Reason) != "delivery_limit" {
			t.Errorf("dead letter %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter")
	}
	var it, ok, two enc
	it.bytes(1, []byte("x"))
	ok.varint(1, 7)
	ok.bytes(6, it.b)
	two.b = append(append([]byte(nil), ok.b...), protowire.AppendTag(nil, 6, protowire.BytesType)...)
	two.b = protowire.AppendBytes(two.b, it.b)
	two.varint(7, batchError)
	for _, m := range [][]byte{ok.b, two.b, {0xff}} {
		if _, err := DecodeDeadLetter(m); !IsCode(err, "bad_reply") {
			t.Errorf("%x decoded as a dead letter: %v", m, err)
		}
	}
	if cn := e.counters(); cn["dead_lettered"] != float64(1) || cn["tokens_received"] != cn["tokens_completed"] {
		t.Errorf("counters %v", cn)
	}
}

// A daemon that forgets every registration at once (here a fake on the daemon's subjects
// answering each pull with unknown_consumer) gets registrations with backoff, not a loop of them.
func TestForgetfulDaemonRegistersWithBackoff(t *testing.T) {
	e := startEnv(t)
	e.daemonStop(syscall.SIGTERM)
	var registers atomic.Int64
	reg, err := e.probe.Subscribe("lanes.register.llama", func(m *nats.Msg) {
		registers.Add(1)
		var r enc
		r.str(1, "fake"+strconv.FormatInt(registers.Load(), 10))
		r.str(2, "fake.pull")
		r.str(3, "fake.ack")
		r.str(4, "fake.heartbeat")
		r.str(5, "fake.bye")
		r.varint(6, 1000)
		r.varint(7, 10000)
		r.varint(8, 30000)
		r.varint(10, ProtocolVersion)
		m.Respond(r.b)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unsubscribe()
	pull, err := e.probe.Subscribe("fake.pull", func(m *nats.Msg) {
		var b enc
		b.varint(7, batchError)
		b.str(8, "unknown_consumer: register again to get a consumer id")
		m.Respond(b.b)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Unsubscribe()
	c := e.client(Options{})
	k, err := c.Consumer(ctxT(t, 10*time.Second), ConsumerOptions{Model: "llama", MaxBatchSize: 8,
		MaxBatchTokens: 4096, OnWarning: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	k.Close(ctxT(t, 5*time.Second), false)
	// Waits of 0, 0.2, 0.4, 0.8 and 1.6 s fit in 3 s: about 5 registrations.
	if n := registers.Load(); n < 3 || n > 8 {
		t.Errorf("%d registrations in 3 s against a daemon that forgets each at once", n)
	}
}

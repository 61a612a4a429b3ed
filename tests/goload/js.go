package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// JetStream baseline: work-queue stream, one async publisher with a window of pending acks,
// pull consumers sharing one durable, Fetch(batch), per-message async Ack.
func runJS() {
	N := *nItems
	const stream, subject, durable = "WQ", "wq.items", "work"
	anc := connect("goload-js-admin")
	ajs, _ := anc.JetStream()
	ajs.DeleteStream(stream)
	if _, err := ajs.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{subject},
		Retention: nats.WorkQueuePolicy, Storage: nats.FileStorage, Replicas: 1}); err != nil {
		fmt.Fprintln(os.Stderr, "add stream:", err)
		os.Exit(1)
	}
	if _, err := ajs.AddConsumer(stream, &nats.ConsumerConfig{Durable: durable, AckPolicy: nats.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 1 << 20, MaxWaiting: 4096, DeliverPolicy: nats.DeliverAllPolicy}); err != nil {
		fmt.Fprintln(os.Stderr, "add consumer:", err)
		os.Exit(1)
	}
	delivered := make([]uint32, N)
	var received, redeliv, foreign, fetchErrs, pubErrs, ackErrs atomic.Int64
	var done atomic.Bool
	allDone := make(chan struct{})
	var once sync.Once
	var unique atomic.Int64

	var wg sync.WaitGroup
	var conns []*nats.Conn
	for i := 0; i < *nConsumers; i++ {
		nc := connect(fmt.Sprintf("goload-js-consumer-%d", i))
		conns = append(conns, nc)
		js, _ := nc.JetStream()
		sub, err := js.PullSubscribe(subject, durable, nats.Bind(stream, durable))
		if err != nil {
			fmt.Fprintln(os.Stderr, "pull subscribe:", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				msgs, err := sub.Fetch(*fetch, nats.MaxWait(2*time.Second))
				if err != nil && err != nats.ErrTimeout {
					fetchErrs.Add(1)
				}
				for _, m := range msgs {
					if len(m.Data) < 8 {
						foreign.Add(1)
						continue
					}
					seq := int(binary.BigEndian.Uint64(m.Data))
					if seq >= N {
						foreign.Add(1)
						continue
					}
					if md, e := m.Metadata(); e == nil && md.NumDelivered > 1 {
						redeliv.Add(1)
					}
					if err := m.Ack(); err != nil {
						ackErrs.Add(1)
					}
					received.Add(1)
					if atomic.AddUint32(&delivered[seq], 1) == 1 {
						if unique.Add(1) == int64(N) {
							once.Do(func() { close(allDone) })
						}
					}
				}
			}
		}()
	}

	pnc := connect("goload-js-producer")
	pjs, _ := pnc.JetStream(nats.PublishAsyncMaxPending(*window),
		nats.PublishAsyncErrHandler(func(_ nats.JetStream, m *nats.Msg, err error) {
			pubErrs.Add(1)
		}))
	payload := make([]byte, *payloadSz)
	t0 := time.Now()
	for i := 0; i < N; i++ {
		p := make([]byte, len(payload))
		copy(p, payload)
		binary.BigEndian.PutUint64(p, uint64(i))
		if _, err := pjs.PublishAsync(subject, p, nats.StallWait(30*time.Second)); err != nil {
			fmt.Fprintln(os.Stderr, "publish async:", err)
			pubErrs.Add(1)
		}
	}
	<-pjs.PublishAsyncComplete()
	tPub := time.Since(t0)
	stuck := false
	select {
	case <-allDone:
	case <-time.After(*timeout - time.Since(t0)):
		stuck = true
	}
	done.Store(true)
	for _, nc := range conns {
		nc.Flush()
	}
	tRecv := time.Since(t0)
	// wait for the acks to be applied: the work queue is empty
	var left uint64
	for {
		si, err := ajs.StreamInfo(stream)
		if err == nil {
			left = si.State.Msgs
			if left == 0 || time.Since(t0) > *timeout {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	el := time.Since(t0)
	wg.Wait() // the consumers' last Fetch returned: delivered is theirs no more
	var lost, dups int
	for i := range delivered {
		if delivered[i] == 0 {
			lost++
		} else if delivered[i] > 1 {
			dups++
		}
	}
	fmt.Printf("RESULT system=jetstream %s n=%d window=%d consumers=%d fetch=%d elapsed=%.3fs items_per_s=%.0f publish_phase=%.3fs all_received=%.3fs stream_left=%d stuck=%v\n",
		*label, N, *window, *nConsumers, *fetch, el.Seconds(), float64(N)/el.Seconds(), tPub.Seconds(), tRecv.Seconds(), left, stuck)
	fmt.Printf("  verify: pub_errors=%d received=%d redelivered=%d never_delivered=%d delivered_more_than_once=%d foreign=%d fetch_errors=%d ack_errors=%d\n",
		pubErrs.Load(), received.Load(), redeliv.Load(), lost, dups, foreign.Load(), fetchErrs.Load(), ackErrs.Load())
	for _, nc := range conns {
		nc.Close()
	}
	pnc.Close()
	ajs.DeleteStream(stream)
	anc.Close()
	if stuck || lost > 0 || dups > 0 || left != 0 || pubErrs.Load() > 0 || ackErrs.Load() > 0 {
		os.Exit(3)
	}
}

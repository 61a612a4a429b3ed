// A lanesched producer in Go: submits -count items of one shape to -model, waits for their
// results on an inbox (published by a worker on each item's ReplyTo), prints the verdicts.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	lanes "lanesched/clients/go"
)

func main() {
	server := flag.String("server", "", "NATS URL (default env LANESCHED_SERVER or nats://127.0.0.1:4222)")
	model := flag.String("model", "llama", "model")
	count := flag.Int("count", 10, "items")
	wait := flag.Duration("wait", 0, "how long to wait for results on reply_to (0: do not wait)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := lanes.Connect(ctx, lanes.Options{Servers: *server})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	inbox := client.NewInbox()
	results, _ := client.Conn().SubscribeSync(inbox + ".>")
	items := make([]lanes.Item, *count)
	for i := range items {
		id := fmt.Sprintf("go-%d-%d", time.Now().UnixNano(), i)
		items[i] = lanes.Item{ID: []byte(id), Tokens: uint32(50 + 10*i),
			Components: []string{"You are a helpful assistant."},
			Payload:    []byte(fmt.Sprintf(`{"prompt": "question %d"}`, i)), ReplyTo: inbox + "." + id}
	}
	r, err := client.Submit(ctx, *model, items)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("submitted %d: %d accepted, %d duplicate, %d rejected\n", len(items), r.Accepted, r.Duplicate, r.Rejected)
	for got := 0; *wait > 0 && got < r.Accepted; got++ {
		m, err := results.NextMsg(*wait)
		if err == nats.ErrTimeout {
			log.Fatalf("%d of %d results came", got, r.Accepted)
		}
		fmt.Printf("result on %s: %s\n", m.Subject, m.Data)
	}
}

// A lanesched worker in Go: registers for -model, takes batches, answers each item on its
// ReplyTo with a made-up completion and acks the batch, until -idle passes without work.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	lanes "lanesched/clients/go"
)

func main() {
	server := flag.String("server", "", "NATS URL (default env LANESCHED_SERVER or nats://127.0.0.1:4222)")
	model := flag.String("model", "llama", "model")
	idle := flag.Duration("idle", 5*time.Second, "exit after this long without a batch")
	flag.Parse()

	client, err := lanes.Connect(context.Background(), lanes.Options{Servers: *server})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
	worker, err := client.Consumer(context.Background(), lanes.ConsumerOptions{
		Model: *model, MaxBatchSize: 8, MaxBatchTokens: 4096, Name: "go-example",
		BatchFixedUs: 20000, TokenNs: 50, CacheShapes: 2, // what one batch costs this GPU
		OnWarning: func(err error) { log.Printf("lanesched: %v", err) },
	})
	if err != nil {
		log.Fatal(err)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), *idle)
		batch, err := worker.Next(ctx)
		cancel()
		if err != nil {
			break
		}
		fmt.Printf("batch %d: %d items, shape %s, pad_to %d\n", batch.BatchID, len(batch.Items), lanes.ShapeFormat(batch.Signature), batch.PadTo)
		for _, it := range batch.Items {
			if it.ReplyTo != "" {
				client.Conn().Publish(it.ReplyTo, []byte(fmt.Sprintf(`{"id": %q, "text": "done"}`, it.ID)))
			}
		}
		if _, err := batch.Ack(context.Background()); err != nil {
			log.Printf("ack: %v", err)
		}
	}
}

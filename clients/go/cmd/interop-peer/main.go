// The interoperability matrix's Go peer (tests/interop/README.md says what every peer does; the
// C, Python and Node peers do the same).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	lanes "lanesched/clients/go"
)

var shapes = map[string]string{"A": "interop system prompt A", "B": "interop system prompt B"}

type result struct {
	Items    int `json:"items"`
	Tokens   int `json:"tokens"`
	Rejected int `json:"rejected,omitempty"`
	Bad      int `json:"bad"`
}

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: interop-peer produce|consume --server URL --models m1,m2 [--count N] [--seed S] [--timeout-s T]")
	}
	role := os.Args[1]
	fs := flag.NewFlagSet(role, flag.ExitOnError)
	server := fs.String("server", "", "")
	modelList := fs.String("models", "", "")
	count := fs.Int("count", 25, "")
	seed := fs.Int("seed", 1, "")
	timeout := fs.Float64("timeout-s", 60, "")
	fs.Parse(os.Args[2:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout*float64(time.Second)))
	defer cancel()
	client, err := lanes.Connect(ctx, lanes.Options{Servers: *server})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
	models := strings.Split(*modelList, ",")
	out := map[string]*result{}
	var mu sync.Mutex
	if role == "produce" {
		for _, m := range models {
			items := make([]lanes.Item, *count)
			tokens := 0
			for i := range items {
				letter := string("AB"[i%2])
				t := 1 + (i*37+*seed)%300
				id := fmt.Sprintf("%s-%d", m, i)
				items[i] = lanes.Item{ID: []byte(id), Tokens: uint32(t), Components: []string{shapes[letter]},
					Payload: []byte(fmt.Sprintf("%s|%s|%d|%s", m, id, t, letter)), ReplyTo: "interop." + m + "." + id,
					PrefixTokens: 4, MaxWaitMs: 500}
				tokens += t
			}
			r, err := client.Submit(ctx, m, items)
			if err != nil {
				log.Fatal(err)
			}
			out[m] = &result{Items: r.Accepted, Tokens: tokens, Rejected: r.Rejected}
		}
	} else {
		signs := map[uint64]string{lanes.ShapeSign(shapes["A"]): "A", lanes.ShapeSign(shapes["B"]): "B"}
		var wg sync.WaitGroup
		for _, m := range models {
			wg.Add(1)
			go func(m string) {
				defer wg.Done()
				seen := map[string]uint32{}
				bad := 0
				k, err := client.Consumer(ctx, lanes.ConsumerOptions{Model: m, MaxBatchSize: 8, MaxBatchTokens: 4096, Name: "go-" + m})
				if err != nil {
					log.Fatal(err)
				}
				for len(seen) < *count {
					b, err := k.Next(ctx)
					if err != nil {
						break
					}
					letter, known := signs[b.Signature]
					for _, it := range b.Items {
						id := string(it.ID)
						want := fmt.Sprintf("%s|%s|%d|%s", m, id, it.Tokens, letter)
						if b.Model != m || !known || string(it.Payload) != want || it.ReplyTo != "interop."+m+"."+id ||
							it.PrefixTokens != 4 {
							bad++
						}
						seen[id] = it.Tokens
					}
					if r, err := b.Ack(context.Background()); err != nil || r.Code != "" {
						bad++
					}
				}
				k.Close(context.Background(), true)
				tokens := 0
				for _, t := range seen {
					tokens += int(t)
				}
				mu.Lock()
				out[m] = &result{Items: len(seen), Tokens: tokens, Bad: bad}
				mu.Unlock()
			}(m)
		}
		wg.Wait()
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"models": out})
}

package pubsub_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/pubsub"

	"cloud.google.com/go/pubsub/v2/pstest"
)

// A producer publishes two versions of one order and, after a retry it
// believed failed, the first one again: Pub/Sub has no publish-side
// dedupe, so all three arrive, in order on the ordering key. seqbox's
// inbox recognises the duplicate.
func Example() {
	ctx := context.Background()
	// An in-process Pub/Sub emulator (the client library's pstest): in
	// production, leave Endpoint empty and name your project.
	srv := pstest.NewServer()
	defer srv.Close()
	cfg := pubsub.Config{
		Project: "seqbox", Endpoint: srv.Addr,
		Topic: "orders", Subscription: "orders-seqbox",
		AckDeadline: 60 * time.Second, MaxDeliveryAttempts: 25, RetryMaxAttempts: 5,
	}
	if err := pubsub.Setup(ctx, cfg); err != nil {
		panic(err)
	}

	pub, err := pubsub.NewPublisher(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	for _, v := range []int{1, 2, 1} {
		ev := fmt.Sprintf(`{"specversion":"1.0","id":"ord-v%d","source":"erp","type":"order.changed","partitionkey":"PED-4821","objectversion":%d}`, v, v)
		if err := pub.Publish(ctx, []byte(ev)); err != nil {
			panic(err)
		}
	}

	dir, _ := os.MkdirTemp("", "seqbox-pubsub-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	tr, err := pubsub.Open(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer tr.Close()

	var mu sync.Mutex
	var seen []string
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "order-sync", Store: st, Transport: tr,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: cfg.RetryMaxAttempts}},
		Handler:  func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error { return nil },
		Observer: func(res seqboxtype.Result) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("%s %s", res.ID, res.Outcome))
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.RunUntilIdle(ctx, 3*time.Second); err != nil {
		panic(err)
	}
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// ord-v1 applied
	// ord-v2 applied
	// ord-v1 duplicate
}

package seqbox_test

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
	"github.com/seqbox/seqbox/transport/embedded"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The five-minute tour: a handler that creates a CRM task inside the inbox
// transaction, and a message delivered twice. The second delivery is
// recognised and creates nothing.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)

	st, err := sqlite.Open(ctx, filepath.Join(dir, "seqbox.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if _, err := st.DB().Exec(`CREATE TABLE crm_tasks (opportunity TEXT, title TEXT)`); err != nil {
		panic(err)
	}

	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name:  "crm-followup",
		Store: st,
		// The handler writes with tx: the task and the inbox identity
		// commit together or not at all.
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks VALUES ($1, $2)`, ev.PartitionKey, "follow up")
			return err
		},
	})
	if err != nil {
		panic(err)
	}

	msg := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"followup.requested",
		"partitionkey":"opp-2481","objectversion":41,"businesskey":"followup:opp-2481:meeting-184"}`)
	for attempt := 1; attempt <= 2; attempt++ {
		results, err := consumer.Deliver(ctx, msg, attempt)
		if err != nil {
			panic(err)
		}
		fmt.Printf("delivery %d: %s\n", attempt, results[0].Outcome)
	}
	var tasks int
	st.DB().QueryRow(`SELECT COUNT(*) FROM crm_tasks`).Scan(&tasks)
	fmt.Println("tasks:", tasks)
	// Output:
	// delivery 1: applied
	// delivery 2: duplicate
	// tasks: 1
}

// Permanent marks an error not worth retrying: the delivery goes to the DLQ
// at once, with the original envelope.
func ExamplePermanent() {
	err := seqbox.Permanent(fmt.Errorf("customer record is corrupt"))
	fmt.Println(seqbox.IsPermanent(err), err)
	// Output: true permanent: customer record is corrupt
}

// ValidateSettings checks a consumer's name and policies before any
// database is opened: a command refuses a bad flag without creating or
// migrating anything.
func ExampleConfig_ValidateSettings() {
	cfg := seqbox.Config{Name: "crm-followup", Policies: seqbox.Policies{GapPolicy: "wait"}}
	fmt.Println(cfg.ValidateSettings())
	cfg.GapPolicy = seqbox.GapHold
	fmt.Println(cfg.ValidateSettings())
	// Output:
	// invalid config: GapPolicy: "wait" is not hold or advance
	// <nil>
}

// ParseEvent validates a CloudEvent and names the field that is wrong.
func ExampleParseEvent() {
	_, err := seqboxtype.ParseEvent([]byte(`{"id":"1","source":"erp","type":"order.cancelled","partitionkey":"PED-4821","objectversion":"v3"}`))
	fmt.Println(err)
	// Output: invalid event: objectversion: "v3" is not an integer
}

// RunUntilIdle consumes from a queue until it is empty: here three
// deliveries, one of them a redelivery of the same event, in the embedded
// queue that shares the store's file.
func ExampleConsumer_RunUntilIdle() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")

	st, err := sqlite.Open(ctx, path)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	q, err := embedded.Open(ctx, path, embedded.Config{})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	for _, id := range []string{"evt-1", "evt-2", "evt-1"} {
		if err := q.Publish(ctx, []byte(`{"specversion":"1.0","id":"`+id+`","source":"crm","type":"task.create"}`)); err != nil {
			panic(err)
		}
	}

	outcomes := map[seqboxtype.Outcome]int{}
	var mu sync.Mutex
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-followup", Store: st, Transport: q,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error { return nil },
		Observer: func(res seqboxtype.Result) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[res.Outcome]++
		},
	})
	if err != nil {
		panic(err)
	}
	if err := consumer.RunUntilIdle(ctx, 500*time.Millisecond); err != nil {
		panic(err)
	}
	fmt.Println("applied:", outcomes[seqboxtype.Applied], "duplicate:", outcomes[seqboxtype.Duplicate])
	// Output: applied: 2 duplicate: 1
}

// A consumer fed by the application's own loop (an HTTP handler, a
// poller) calls Deliver for each message and Maintain every second or so:
// Maintain ends holds that timed out, runs operator requests, refreshes the
// gauges and purges expired identities, as Run does in the background.
func ExampleConsumer_Maintain() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "webhook", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error { return nil },
	})
	if err != nil {
		panic(err)
	}
	res, err := consumer.Deliver(ctx, []byte(`{"specversion":"1.0","id":"evt-1","source":"crm","type":"task.create"}`), 1)
	if err != nil {
		panic(err)
	}
	if err := consumer.Maintain(ctx); err != nil {
		panic(err)
	}
	fmt.Println(res[0].Outcome)
	// Output: applied
}

// A consumer with a TracerProvider continues each message's trace: the
// process span is a child of the envelope's traceparent and records the
// outcome. Here the spans go to an in-memory recorder; a program would
// use an OTLP exporter.
func ExampleConfig_tracerProvider() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "seqbox.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()

	spans := tracetest.NewSpanRecorder()
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name:           "crm-followup",
		Store:          st,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		Handler:        func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil },
	})
	if err != nil {
		panic(err)
	}
	msg := []byte(`{"specversion":"1.0","id":"evt-7","source":"crm","type":"deal.won",
		"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
	if _, err := consumer.Deliver(ctx, msg, 1); err != nil {
		panic(err)
	}
	for _, s := range spans.Ended() {
		var outcome string
		for _, kv := range s.Attributes() {
			if kv.Key == "seqbox.outcome" {
				outcome = kv.Value.AsString()
			}
		}
		fmt.Println(s.Name(), s.SpanContext().TraceID(), "parent", s.Parent().SpanID(), outcome)
	}
	// Output:
	// process crm-followup 4bf92f3577b34da6a3ce929d0e0e4736 parent 00f067aa0ba902b7 applied
}

// Sweep ends the holds whose HoldTimeout passed: here HoldExpiry=advance
// records the gap and applies the held version. Run sweeps every second;
// a consumer driven by Deliver calls Sweep, or Maintain, which sweeps
// with the rest of the upkeep.
func ExampleConsumer_Sweep() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	consumer, err := seqbox.NewConsumer(seqbox.Config{
		Name: "orders", Store: st,
		Policies: seqbox.Policies{HoldTimeout: time.Minute, HoldExpiry: seqbox.HoldExpiryAdvance},
		Now:      func() time.Time { return now },
		Handler:  func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error { return nil },
	})
	if err != nil {
		panic(err)
	}
	for _, v := range []int{1, 3} { // version 2 never comes
		msg := fmt.Sprintf(`{"specversion":"1.0","id":"ord-%d","source":"erp","type":"order.updated","partitionkey":"PED-1","objectversion":%d}`, v, v)
		results, err := consumer.Deliver(ctx, []byte(msg), 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s\n", results[0].ID, results[0].Outcome)
	}
	now = now.Add(2 * time.Minute)
	swept, err := consumer.Sweep(ctx)
	if err != nil {
		panic(err)
	}
	for _, res := range swept {
		fmt.Printf("swept %s: %s\n", res.ID, res.Outcome)
	}
	// Output:
	// ord-1: applied
	// ord-3: held
	// swept ord-3: applied
}

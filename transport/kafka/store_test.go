package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport"
)

// effects is a seqbox store in a fresh SQLite file whose effects table
// records every application, in commit order, and the outcomes the
// consumers reached.
type effects struct {
	st       store.Store
	mu       sync.Mutex
	outcomes map[seqbox.Outcome]int
}

func newEffects(t *testing.T) *effects {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, pkey TEXT, version INTEGER)`); err != nil {
		t.Fatalf("create effects: %v", err)
	}
	return &effects{st: st, outcomes: map[seqbox.Outcome]int{}}
}

// record is the handler: one effects row per application.
func record(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
	v, _ := ev.Version()
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (id, pkey, version) VALUES ($1, $2, $3)`, ev.ID, ev.PartitionKey, v)
	return err
}

// consumer is a seqbox consumer named name over tr.
func (e *effects) consumer(t *testing.T, tr transport.Transport, change func(*seqbox.Config)) *seqbox.Consumer {
	t.Helper()
	first := int64(1)
	cfg := seqbox.Config{
		Name: "kafkatest", Store: e.st, Transport: tr, Handler: record,
		Workers: 4, BatchSize: 16, HoldTimeout: time.Minute, FirstVersion: &first,
		Retry: seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
		Observer: func(d seqbox.Decision) {
			e.mu.Lock()
			e.outcomes[d.Outcome]++
			e.mu.Unlock()
		},
	}
	if change != nil {
		change(&cfg)
	}
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	return c
}

// outcome is how many decisions reached o.
func (e *effects) outcome(o seqbox.Outcome) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outcomes[o]
}

// applied returns each key's applied versions in commit order and the
// number of effect rows.
func (e *effects) applied(t *testing.T) (map[string][]int64, int) {
	t.Helper()
	rows, err := e.st.DB().Query(`SELECT pkey, version FROM effects ORDER BY seq`)
	if err != nil {
		t.Fatalf("read effects: %v", err)
	}
	defer rows.Close()
	out, n := map[string][]int64{}, 0
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatalf("scan effects: %v", err)
		}
		out[k] = append(out[k], v)
		n++
	}
	return out, n
}

// waitApplied waits until the effects table holds want rows.
func (e *effects) waitApplied(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, n := e.applied(t); n >= want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, n := e.applied(t)
	t.Fatalf("%d of %d messages applied within %s", n, want, within)
}

// inOrder fails unless every key was applied exactly at 1..top, in order.
func inOrder(t *testing.T, got map[string][]int64, keys int, top int64) {
	t.Helper()
	if len(got) != keys {
		t.Fatalf("%d keys applied, want %d", len(got), keys)
	}
	for key, vs := range got {
		ok := int64(len(vs)) == top
		for i, v := range vs {
			ok = ok && v == int64(i+1)
		}
		if !ok {
			t.Fatalf("key %s applied %v, want 1..%d once each in order", key, vs, top)
		}
	}
}

// running runs c until the returned stop is called; stop fails the test
// if Run failed.
func running(t *testing.T, c *seqbox.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// event is a CloudEvent with id "<key>-v<version>".
func event(key string, version int64) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-v%d","source":"kafkatest","type":"test.event",`+
		`"partitionkey":%q,"objectversion":%d,"data":{"n":%d}}`, key, version, key, version, version)
}

// publishAll publishes keys×versions events, version by version.
func publishAll(t *testing.T, p transport.Publisher, keys int, versions int64) int {
	t.Helper()
	var bodies [][]byte
	for v := int64(1); v <= versions; v++ {
		for k := range keys {
			bodies = append(bodies, event(fmt.Sprintf("key-%02d", k), v))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range bodies {
		if err := p.Publish(ctx, b); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	return len(bodies)
}

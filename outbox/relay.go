package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// Config configures a Relay. Zero values take the defaults.
type Config struct {
	// Name is the relay's lease: relays with one name take turns, one
	// active at a time. Default "default".
	Name string
	// Batch is how many events one round reads. Default 256.
	Batch int
	// Parallel is how many partition keys publish at once. Default 8.
	Parallel int
	// Interval is how long an idle relay waits before it looks again.
	// Default 100ms.
	Interval time.Duration
	// Lease is how long the active relay holds its lease without renewing
	// it; a standby takes over after that. Default 15s.
	Lease time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives publish failures. Default slog.Default().
	Logger *slog.Logger
}

// Relay publishes the outbox.
type Relay struct {
	db    *sql.DB
	pub   transport.Publisher
	cfg   Config
	owner string
	hook  fault.Hook
}

// Crash points of the relay, for the chaos harness and the crash tests.
const (
	// AfterPublish: an event is published and not yet marked.
	AfterPublish fault.Point = "relay_after_publish"
	// AfterMark: a round's events are marked published.
	AfterMark fault.Point = "relay_after_mark"
)

func init() {
	fault.InstallRelay = func(r any, h fault.Hook) { r.(*Relay).hook = h }
}

// NewRelay returns a relay that publishes st's outbox to pub.
func NewRelay(st store.Store, pub transport.Publisher, cfg Config) (*Relay, error) {
	if st == nil || pub == nil {
		return nil, errors.New("outbox: a store and a publisher are required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", cfg.Interval}, {"Lease", cfg.Lease}} {
		if d.v < 0 {
			return nil, fmt.Errorf("outbox: %s %s is negative", d.name, d.v)
		}
	}
	if cfg.Batch < 0 || cfg.Parallel < 0 {
		return nil, fmt.Errorf("outbox: Batch %d and Parallel %d must not be negative", cfg.Batch, cfg.Parallel)
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.Batch == 0 {
		cfg.Batch = 256
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 8
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Lease == 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Relay{db: st.DB(), pub: pub, cfg: cfg, owner: hex.EncodeToString(b[:])}, nil
}

// Run publishes until ctx ends, taking the lease when it is free and
// keeping it while active. It returns nil when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		n, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			if fault.IsCrash(err) {
				return err
			}
			r.cfg.Logger.Warn("outbox: relay round failed", "relay", r.cfg.Name, "err", err)
		}
		if n > 0 && err == nil {
			continue // more may be waiting
		}
		t := time.NewTimer(r.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// RunOnce runs one round when this relay holds (or takes) the lease: it
// reads up to Batch unpublished events, publishes them key by key, and
// marks what was published. It returns how many it published; zero with a
// nil error when another relay holds the lease or nothing is waiting.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	leader, err := r.lease(ctx)
	if err != nil || !leader {
		return 0, err
	}
	events, err := r.unpublished(ctx)
	if err != nil || len(events) == 0 {
		return 0, err
	}
	done, failed := r.publish(ctx, events)
	if err := fault.Hook(r.hook).At(AfterPublish); err != nil {
		return 0, err
	}
	if err := r.mark(ctx, done, failed); err != nil {
		return 0, err
	}
	if err := fault.Hook(r.hook).At(AfterMark); err != nil {
		return 0, err
	}
	if len(failed) > 0 {
		return len(done), fmt.Errorf("outbox: %d of %d events not published this round (their keys wait): %w",
			len(failed), len(events), errors.Join(firstErrors(failed, 3)...))
	}
	return len(done), nil
}

// event is one unpublished outbox row.
type event struct {
	seq  int64
	key  string
	id   string
	body []byte
}

func (r *Relay) unpublished(ctx context.Context) ([]event, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT seq, partitionkey, event_id, body FROM seqbox_outbox
		WHERE published_at IS NULL ORDER BY seq LIMIT $1`, r.cfg.Batch)
	if err != nil {
		return nil, fmt.Errorf("outbox: read: %w", err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		if err := rows.Scan(&e.seq, &e.key, &e.id, &e.body); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// publish publishes the events, each key's in order and up to Parallel
// keys at once. A key stops at its first failure, so its later events
// are not published ahead of it.
func (r *Relay) publish(ctx context.Context, events []event) (done []int64, failed map[int64]error) {
	var keys []string
	byKey := map[string][]event{}
	for _, e := range events {
		if _, ok := byKey[e.key]; !ok {
			keys = append(keys, e.key)
		}
		byKey[e.key] = append(byKey[e.key], e)
	}
	failed = map[int64]error{}
	var mu sync.Mutex
	sem := make(chan struct{}, r.cfg.Parallel)
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, e := range byKey[k] {
				err := r.pub.Publish(ctx, e.body)
				mu.Lock()
				if err != nil {
					failed[e.seq] = fmt.Errorf("event %s: %w", e.id, err)
				} else {
					done = append(done, e.seq)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return done, failed
}

// mark records the round: published rows get their time, failed ones an
// attempt and the error.
func (r *Relay) mark(ctx context.Context, done []int64, failed map[int64]error) error {
	now := r.cfg.Now().UnixMicro()
	for len(done) > 0 {
		chunk := done[:min(len(done), 500)]
		done = done[len(chunk):]
		args := []any{now}
		marks := make([]string, len(chunk))
		for i, s := range chunk {
			args = append(args, s)
			marks[i] = fmt.Sprintf("$%d", i+2)
		}
		if _, err := r.db.ExecContext(ctx, `UPDATE seqbox_outbox SET published_at = $1
			WHERE seq IN (`+strings.Join(marks, ", ")+`)`, args...); err != nil {
			return fmt.Errorf("outbox: mark published: %w", err)
		}
	}
	for seq, ferr := range failed {
		if _, err := r.db.ExecContext(ctx, `UPDATE seqbox_outbox SET attempts = attempts + 1, last_error = $1
			WHERE seq = $2`, ferr.Error(), seq); err != nil {
			return fmt.Errorf("outbox: record failure: %w", err)
		}
	}
	return nil
}

// lease takes or renews the relay's lease; false when another relay
// holds it.
func (r *Relay) lease(ctx context.Context) (bool, error) {
	now := r.cfg.Now()
	res, err := r.db.ExecContext(ctx, `INSERT INTO seqbox_outbox_relay (name, owner, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE seqbox_outbox_relay.owner = excluded.owner OR seqbox_outbox_relay.expires_at < $4`,
		r.cfg.Name, r.owner, now.Add(r.cfg.Lease).UnixMicro(), now.UnixMicro())
	if err != nil {
		return false, fmt.Errorf("outbox: lease %s: %w", r.cfg.Name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Release gives the lease up, so a standby relay takes over at once.
func (r *Relay) Release(ctx context.Context) error {
	_, err := r.db.ExecContext(ctx, `DELETE FROM seqbox_outbox_relay WHERE name = $1 AND owner = $2`, r.cfg.Name, r.owner)
	return err
}

func firstErrors(m map[int64]error, n int) []error {
	var out []error
	for _, e := range m {
		if len(out) == n {
			break
		}
		out = append(out, e)
	}
	return out
}

// Pending counts the events not yet published, and the age of the oldest.
func (r *Relay) Pending(ctx context.Context) (int, time.Duration, error) {
	var n int
	var oldest sql.NullInt64
	err := r.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(created_at) FROM seqbox_outbox WHERE published_at IS NULL`).Scan(&n, &oldest)
	if err != nil || !oldest.Valid {
		return n, 0, err
	}
	return n, r.cfg.Now().Sub(time.UnixMicro(oldest.Int64)), nil
}

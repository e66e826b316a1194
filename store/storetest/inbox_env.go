package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// inboxBundle is one fresh store with the record handler's business tables
// and the consumer configuration the inbox tests start from. The record
// handler's record_effects rows are the business effects.
type inboxBundle struct {
	st  store.Store
	cfg seqbox.Config
}

const inboxConsumer = "inbox"

func setupInbox(t *testing.T, open Factory) *inboxBundle {
	t.Helper()
	st := open(t)
	require.NoError(t, replay.EnsureRecordTables(context.Background(), st.DB()))
	return &inboxBundle{st: st, cfg: seqbox.Config{
		Name: inboxConsumer, Store: st, Handler: replay.RecordHandler(inboxConsumer),
		Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
	}}
}

// consumer builds a consumer from the bundle's config after applying the
// changes given; the bundle's config itself is left alone.
func (b *inboxBundle) consumer(t *testing.T, changes ...func(*seqbox.Config)) *seqbox.Consumer {
	t.Helper()
	cfg := b.cfg
	for _, ch := range changes {
		ch(&cfg)
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	return c
}

// deliver delivers raw and returns the message's own decision (the first).
func deliver(t *testing.T, c *seqbox.Consumer, raw []byte, attempt int) seqboxtype.Result {
	t.Helper()
	ds, err := c.Deliver(context.Background(), raw, attempt)
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	return ds[0]
}

// effects counts the business effects of the bundle's consumer, of one
// identity when id is not empty.
func (b *inboxBundle) effects(t *testing.T, id string) int {
	t.Helper()
	return countEffects(t, b.st, b.cfg.Name, id)
}

func countEffects(t *testing.T, st store.Store, consumer, id string) int {
	t.Helper()
	var n int
	var err error
	if id == "" {
		err = st.DB().QueryRow(`SELECT COUNT(*) FROM record_effects WHERE consumer = $1`, consumer).Scan(&n)
	} else {
		err = st.DB().QueryRow(`SELECT COUNT(*) FROM record_effects WHERE consumer = $1 AND id = $2`, consumer, id).Scan(&n)
	}
	require.NoError(t, err)
	return n
}

func (b *inboxBundle) counts(t *testing.T) store.Counts {
	t.Helper()
	c, err := b.st.Executor().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	return c
}

// inboxOutcome reads the outcome recorded for an identity straight from
// the inbox table ("" when the identity is not recorded).
func (b *inboxBundle) inboxOutcome(t *testing.T, source, id string) string {
	t.Helper()
	var out string
	err := b.st.DB().QueryRow(`SELECT outcome FROM seqbox_inbox WHERE consumer = $1 AND source = $2 AND id = $3`,
		b.cfg.Name, source, id).Scan(&out)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return out
}

// audit lists the consumer's audit rows, oldest first.
func (b *inboxBundle) audit(t *testing.T) []store.AuditRow {
	t.Helper()
	rows, err := b.st.Executor().AuditList(context.Background(), store.AuditListParams{Consumer: b.cfg.Name, Key: "", Limit: 1000})
	require.NoError(t, err)
	return rows
}

// duplicates is how many repetitions the consumer's inbox rows counted:
// a duplicate is recorded there, not as an audit row.
func (b *inboxBundle) duplicates(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.st.DB().QueryRowContext(context.Background(),
		`SELECT COALESCE(SUM(duplicates), 0) FROM seqbox_inbox WHERE consumer = $1`, b.cfg.Name).Scan(&n))
	return n
}

func auditOutcomes(rows []store.AuditRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(r.Outcome)
	}
	return out
}

// dlq lists the consumer's DLQ, resolved rows too when all is set.
func (b *inboxBundle) dlq(t *testing.T, all bool) []store.DeadLetter {
	t.Helper()
	dls, err := b.st.Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: b.cfg.Name, All: all})
	require.NoError(t, err)
	return dls
}

// event builds a structured-mode envelope from attributes.
func event(t *testing.T, attrs map[string]any) []byte {
	t.Helper()
	raw, err := json.Marshal(attrs)
	require.NoError(t, err)
	return raw
}

func simple(t *testing.T, id string) []byte {
	t.Helper()
	return event(t, map[string]any{"specversion": "1.0", "id": id, "source": "crm", "type": "task.create",
		"data": map[string]any{"task": "follow up " + id}})
}

// crashAt returns fault hooks that crash at point p, every time it is
// reached, and count how often that was.
func crashAt(p fault.Point, hits *atomic.Int32) func(fault.Point) error {
	return func(q fault.Point) error {
		if q != p {
			return nil
		}
		if hits != nil {
			hits.Add(1)
		}
		return fmt.Errorf("at %s: %w", q, fault.ErrCrash)
	}
}

// scriptedHandler wraps the record handler: call n (from 1) fails with
// errs[n-1] when that is not nil; calls past the script apply.
func scriptedHandler(name string, calls *atomic.Int32, errs ...error) seqbox.Handler {
	record := replay.RecordHandler(name)
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		n := int(calls.Add(1))
		if n <= len(errs) && errs[n-1] != nil {
			return errs[n-1]
		}
		return record(ctx, tx, ev)
	}
}

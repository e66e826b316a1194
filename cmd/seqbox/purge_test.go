package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// Identities recorded long ago (replay --now in the past) are past their
// retention: purge removes them, and a second purge finds nothing.
func TestPurge(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	file := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"specversion":"1.0","id":"a","source":"s","type":"t"}
{"specversion":"1.0","id":"b","source":"s","type":"t"}
`), 0o644))
	ok(t, "replay", "--db", db, "--now", "2020-01-02T03:04:05Z", file)
	require.Regexp(t, `^purged=2 consumer=\S+ retention=\S+\n$`, ok(t, "purge", "--db", db))
	require.Regexp(t, `^purged=0 `, ok(t, "purge", "--db", db))
	require.Contains(t, fails(t, "purge"), "--db is required")
	require.Contains(t, fails(t, "purge", "--db", db, "--batch", "0"), "--batch 0")
	require.Contains(t, fails(t, "purge", "--db", db, "--consumer", "nobody"), `--consumer "nobody"`)
}

// shortRetentionDB is a database whose consumer "short" registered a
// retention of two hours, valid for its own windows (an hour of broker
// redelivery, 1h of DLQ retention plus 30m of redrive) though far below
// the defaults, and recorded two identities three hours ago.
func shortRetentionDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	db := newDB(t)
	st, err := sqlite.Open(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	past := time.Now().Add(-3 * time.Hour)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "short", Store: st,
		Policies: seqbox.Policies{Retention: 2 * time.Hour, RedeliveryWindow: time.Hour, DLQRetention: time.Hour, RedriveWindow: 30 * time.Minute},
		Now:      func() time.Time { return past },
		Handler:  func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }})
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err := c.Deliver(ctx, []byte(`{"specversion":"1.0","id":"`+id+`","source":"s","type":"t"}`), 1)
		require.NoError(t, err)
	}
	return db
}

// Purge validates the retention the consumer registered against the
// windows it registered, not against the defaults: a short retention that
// covers its own windows purges.
func TestPurgeUsesTheRegisteredWindows(t *testing.T) {
	t.Parallel()
	db := shortRetentionDB(t)
	require.Equal(t, "purged=2 consumer=short retention=2h0m0s\n", ok(t, "purge", "--db", db))
	require.Equal(t, "purged=0 consumer=short retention=2h0m0s\n", ok(t, "purge", "--db", db))
}

// A registration whose retention does not cover its own windows is
// refused with that reason, naming the registered values, and so is one
// that does not record the windows at all; nothing is removed.
func TestPurgeRefusesWithTheRegisteredReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		policies string
		want     string
	}{
		{"redelivery", `{"retention":"2h0m0s","redelivery_window":"3h0m0s","dlq_retention":"1h0m0s","redrive_window":"30m0s"}`,
			`seqbox: purge: consumer "short": its registered policies are refused: invalid config: Retention: 2h0m0s is shorter than ` +
				`the broker's redelivery window 3h0m0s: a redelivery would look new; nothing was removed`},
		{"redrive", `{"retention":"2h0m0s","redelivery_window":"1h0m0s","dlq_retention":"2h0m0s","redrive_window":"30m0s"}`,
			`seqbox: purge: consumer "short": its registered policies are refused: invalid config: Retention: 2h0m0s is shorter than ` +
				`DLQ retention 2h0m0s plus redrive window 30m0s: a redrive would look new; nothing was removed`},
		{"unrecorded windows", `{"gap_policy":"hold","retention":"2h0m0s"}`,
			`seqbox: purge: consumer "short": its registration records no redelivery_window, dlq_retention, redrive_window ` +
				`(it registered with an older seqbox), so its retention cannot be checked against them; ` +
				`run the consumer once with this seqbox and purge again; nothing was removed`},
		{"unreadable duration", `{"retention":"2h0m0s","redelivery_window":"soon","dlq_retention":"1h0m0s","redrive_window":"30m0s"}`,
			`seqbox: purge: consumer "short": registered policy redelivery_window "soon": time: invalid duration "soon"; nothing was removed`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := shortRetentionDB(t)
			st, err := sqlite.Open(context.Background(), db)
			require.NoError(t, err)
			reg, err := st.Executor().ConsumerGet(context.Background(), "short")
			require.NoError(t, err)
			reg.Policies = []byte(c.policies)
			require.NoError(t, st.Executor().ConsumerRegister(context.Background(), reg))
			require.NoError(t, st.Close())

			require.Equal(t, c.want, fails(t, "purge", "--db", db))
			// Nothing went: with the valid windows back, both identities purge.
			st, err = sqlite.Open(context.Background(), db)
			require.NoError(t, err)
			reg.Policies = []byte(`{"retention":"2h0m0s","redelivery_window":"1h0m0s","dlq_retention":"1h0m0s","redrive_window":"30m0s"}`)
			require.NoError(t, st.Executor().ConsumerRegister(context.Background(), reg))
			require.NoError(t, st.Close())
			require.Equal(t, "purged=2 consumer=short retention=2h0m0s\n", ok(t, "purge", "--db", db))
		})
	}
}

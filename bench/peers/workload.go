package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// msg is one delivery of the workload: unique message N, identity ID, on
// business key Key at version Version. A duplicate repeats an earlier
// delivery exactly.
type msg struct {
	ID      string
	Key     string
	Version int64
	N       int
	Dup     bool
}

// body is msg as the CloudEvent seqbox consumes; the payload the peers
// carry is the same JSON.
func (m msg) body() []byte {
	return fmt.Appendf(nil, `{"id":%q,"specversion":"1.0","source":"peers","type":"peers.step","partitionkey":%q,"objectversion":%d,"data":{"n":%d}}`,
		m.ID, m.Key, m.Version, m.N)
}

// stream is the workload in send order: n unique messages over keys keys
// (message i is key i mod keys at version i/keys+1, so each key's versions
// arrive in order), and dups re-sends of already-sent ids. Re-send j repeats
// message j*(n/dups) and follows it by lag(n) unique messages, as a producer
// retrying after a timeout would: late enough that the original was sent,
// usually soon enough that it is still queued or in flight.
func stream(n, keys, dups int) []msg {
	uniq := make([]msg, n)
	for i := range uniq {
		uniq[i] = msg{ID: fmt.Sprintf("m%d", i), Key: fmt.Sprintf("k%d", i%keys), Version: int64(i/keys + 1), N: i}
	}
	// after[i] are the re-sends that go right after unique message i.
	after := make(map[int][]int)
	if dups > 0 {
		step := max(1, n/dups)
		for j := range dups {
			orig := (j * step) % n
			at := min(orig+lag(n), n-1)
			after[at] = append(after[at], orig)
		}
	}
	out := make([]msg, 0, n+dups)
	for i, m := range uniq {
		out = append(out, m)
		for _, o := range after[i] {
			d := uniq[o]
			d.Dup = true
			out = append(out, d)
		}
	}
	return out
}

// lag is how many unique messages separate a re-send from its original.
func lag(n int) int { return max(1, min(1000, n/10)) }

// effectsDDL creates the business table every system writes one row per
// applied message to. It has no unique key on purpose: a duplicate that
// gets through shows as a second row.
const effectsDDL = `CREATE TABLE %s.effects (
	id TEXT NOT NULL, key TEXT NOT NULL, version BIGINT NOT NULL,
	at TIMESTAMPTZ NOT NULL DEFAULT now())`

// insertEffect is the effect each handler writes, in the transaction that
// marks its message done.
func insertEffect(schema string) string {
	return `INSERT INTO ` + quote(schema) + `.effects (id, key, version) VALUES ($1, $2, $3)`
}

// quote quotes a PostgreSQL identifier.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// createSchema makes a fresh schema with an empty effects table.
func createSchema(ctx context.Context, admin *sql.DB, schema string) error {
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+quote(schema)); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	if _, err := admin.ExecContext(ctx, fmt.Sprintf(effectsDDL, quote(schema))); err != nil {
		return fmt.Errorf("create %s.effects: %w", schema, err)
	}
	return nil
}

// dropSchema removes a system's schema and everything in it.
func dropSchema(admin *sql.DB, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := admin.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+quote(schema)+` CASCADE`)
	return err
}

// effectCounts are what a system's effects table holds after a run.
type effectCounts struct {
	// Rows is every effect row; Distinct the ids among them.
	Rows, Distinct int64
}

func countEffects(ctx context.Context, admin *sql.DB, schema string) (effectCounts, error) {
	var c effectCounts
	err := admin.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT id) FROM `+quote(schema)+`.effects`).Scan(&c.Rows, &c.Distinct)
	return c, err
}

// withoutParam removes query parameter key from a URL, so that a URL
// written for seqbox (?seqbox_schema=…) also suits plain pgx.
func withoutParam(raw, key string) string {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == key {
			continue
		}
		keep = append(keep, kv)
	}
	if len(keep) == 0 {
		return base
	}
	return base + "?" + strings.Join(keep, "&")
}

// withParam adds key=value to a URL's query.
func withParam(raw, key, value string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}

// waitFor polls done every few milliseconds until it reports true. It
// fails when ctx ends, when done fails, or when progress (a counter the
// system advances) stands still for stall.
func waitFor(ctx context.Context, progress *atomic.Int64, stall time.Duration, done func() (bool, error)) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	last, lastAt := int64(-1), time.Now()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if got := progress.Load(); got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > stall {
			return fmt.Errorf("stalled at %d for %s", got, stall)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

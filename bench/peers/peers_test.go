package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every re-send follows its original, and each key's versions arrive in
// order among the unique messages.
func TestStreamResendsSentIDs(t *testing.T) {
	for _, c := range []struct{ n, keys, dups int }{{10_000, 100, 1_000}, {500, 100, 50}, {30, 7, 45}} {
		ms := stream(c.n, c.keys, c.dups)
		if len(ms) != c.n+c.dups {
			t.Fatalf("%v: %d deliveries", c, len(ms))
		}
		sent := map[string]msg{}
		last := map[string]int64{}
		dups := 0
		for _, m := range ms {
			if m.Dup {
				dups++
				orig, ok := sent[m.ID]
				if !ok {
					t.Fatalf("%v: re-send of %s before it was sent", c, m.ID)
				}
				if orig.Key != m.Key || orig.Version != m.Version || orig.N != m.N || !bytes.Equal(orig.body(), m.body()) {
					t.Fatalf("%v: re-send of %s differs from the original", c, m.ID)
				}
				continue
			}
			if _, ok := sent[m.ID]; ok {
				t.Fatalf("%v: %s sent twice as unique", c, m.ID)
			}
			sent[m.ID] = m
			if m.Version != last[m.Key]+1 {
				t.Fatalf("%v: %s at version %d after %d", c, m.Key, m.Version, last[m.Key])
			}
			last[m.Key] = m.Version
		}
		if dups != c.dups || len(sent) != c.n {
			t.Fatalf("%v: %d re-sends, %d unique", c, dups, len(sent))
		}
	}
}

func TestURLParams(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://h/db":                                  "postgres://h/db",
		"postgres://h/db?seqbox_schema=x":                  "postgres://h/db",
		"postgres://h/db?sslmode=disable&seqbox_schema=x":  "postgres://h/db?sslmode=disable",
		"postgres://h/db?seqbox_schema=x&sslmode=disable":  "postgres://h/db?sslmode=disable",
		"postgres://h/db?sslmode=disable&application_name": "postgres://h/db?sslmode=disable&application_name",
	} {
		if got := withoutParam(in, "seqbox_schema"); got != want {
			t.Errorf("withoutParam(%q) = %q, want %q", in, got, want)
		}
	}
	if got := withParam("postgres://h/db?sslmode=disable", "seqbox_schema", "s"); got != "postgres://h/db?sslmode=disable&seqbox_schema=s" {
		t.Errorf("withParam: %q", got)
	}
}

var finalLine = regexp.MustCompile(`^peers: seqbox_msgs_per_s=\d+ river_msgs_per_s=\d+ watermill_msgs_per_s=\d+$`)

// A reduced workload on the three systems: the last line has the promised
// form, seqbox applied every unique message exactly once, and every
// system's schema is gone afterwards.
func TestReducedWorkloadOnPostgres(t *testing.T) {
	url := os.Getenv("SEQBOX_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SEQBOX_TEST_POSTGRES_URL is not set (CI=true: a missing database is a failure)")
		}
		t.Skip("SEQBOX_TEST_POSTGRES_URL is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := DefaultOptions()
	o.DB, o.Messages, o.Dups, o.WatermillTopics, o.Stall = url, 500, 50, 2, 30*time.Second
	var out bytes.Buffer
	rs, err := Run(ctx, o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !finalLine.MatchString(last) {
		t.Fatalf("last line %q", last)
	}
	// seqbox, seqbox-batch, River, and Watermill on one topic and on two.
	if len(rs) != 5 {
		t.Fatalf("%d results, want 5", len(rs))
	}
	for _, r := range rs {
		if r.Missing() != 0 {
			t.Errorf("%s: %d unique messages without an effect", r.System, r.Missing())
		}
	}
	sb := rs[0]
	if sb.System != "seqbox" || sb.Effects.Rows != 500 || sb.Effects.Distinct != 500 || sb.DupApplied() != 0 {
		t.Fatalf("seqbox: %+v, want 500 effect rows for 500 distinct ids", sb)
	}

	token := regexp.MustCompile(`run ([0-9a-f]{8})`).FindStringSubmatch(lines[0])
	if token == nil {
		t.Fatalf("first line %q names no run", lines[0])
	}
	db, err := sql.Open("pgx", withoutParam(url, "seqbox_schema"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_namespace WHERE nspname LIKE $1`, "peers_"+token[1]+"%").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d schemas of run %s left behind", left, token[1])
	}
}

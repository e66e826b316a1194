package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Result is one scenario's row of the chaos table.
type Result struct {
	Scenario        string
	Deliveries      int
	Kills           int
	ExpectedEffects int
	ActualEffects   int
	// DuplicateEffects counts effects beyond the first of an identity.
	DuplicateEffects int
	// Lost counts messages with no trace: no effect when one was due, or
	// no recorded outcome at all.
	Lost int
	// OrderViolations counts keys whose effects are not 1, 2, ... final.
	OrderViolations int
	// HistoryViolations counts the violations CheckHistory found in the
	// scenario's histories of applies.
	HistoryViolations int
	Failures          []string
	Elapsed           time.Duration
	// Note, when set, is a line of the scenario's own counts, printed
	// under its row (an SDK agent's model calls and remote effects).
	Note string
}

// Passed reports whether the scenario met every invariant.
func (r Result) Passed() bool { return len(r.Failures) == 0 }

func (r *Result) fail(format string, args ...any) {
	if len(r.Failures) < 50 {
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
}

// WriteTable prints the results as the chaos table, the failures under it,
// and the final summary line.
func WriteTable(w io.Writer, rs []Result) (failed int) {
	WriteHeader(w)
	for _, r := range rs {
		WriteRow(w, r)
	}
	return WriteSummary(w, rs)
}

// WriteHeader prints the chaos table's header line.
func WriteHeader(w io.Writer) {
	fmt.Fprintf(w, "%-32s %10s %6s %9s %9s %10s %5s %6s %7s %8s %8s\n", "scenario", "deliveries", "kills",
		"expected", "effects", "dup_effects", "lost", "order", "history", "verdict", "time")
}

// WriteRow prints one scenario's row of the chaos table.
func WriteRow(w io.Writer, r Result) {
	status := "PASS"
	if !r.Passed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%-32s %10d %6d %9d %9d %10d %5d %6d %7d %8s %8s\n", r.Scenario, r.Deliveries, r.Kills,
		r.ExpectedEffects, r.ActualEffects, r.DuplicateEffects, r.Lost, r.OrderViolations, r.HistoryViolations, status, r.Elapsed.Round(time.Millisecond))
	if r.Note != "" {
		fmt.Fprintf(w, "  %s: %s\n", r.Scenario, r.Note)
	}
}

// WriteSummary prints the failures of rs and the final summary line, and
// returns how many scenarios failed.
func WriteSummary(w io.Writer, rs []Result) (failed int) {
	for _, r := range rs {
		if !r.Passed() {
			failed++
		}
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  %s: %s\n", r.Scenario, f)
		}
	}
	fmt.Fprintf(w, "chaos: %s passed, %d failed\n", plural(len(rs)-failed, "scenario"), failed)
	return failed
}

type effectRow struct {
	id, key string
	version int64
}

// verify checks the database against the oracle of the workload.
func verify(ctx context.Context, st store.Store, q queue, wl Workload, res *Result) {
	db := st.DB()
	if err := verifyInto(ctx, st, q, wl, res); err != nil {
		res.fail("verify: %v", err)
	}
	var audits int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_audit WHERE consumer = $1`, Consumer).Scan(&audits); err == nil {
		res.Deliveries = audits + res.ActualEffects
	}
}

func verifyInto(ctx context.Context, st store.Store, q queue, wl Workload, res *Result) error {
	db := st.DB()
	rows, err := db.QueryContext(ctx, `SELECT id, partitionkey, COALESCE(objectversion, 0) FROM seqbox_record_effects
		WHERE consumer = $1 ORDER BY n`, Consumer)
	if err != nil {
		return err
	}
	var effects []effectRow
	for rows.Next() {
		var e effectRow
		if err := rows.Scan(&e.id, &e.key, &e.version); err != nil {
			rows.Close()
			return err
		}
		effects = append(effects, e)
	}
	rows.Close()
	res.ActualEffects = len(effects)
	perID := map[string]int{}
	perKey := map[string][]int64{}
	for _, e := range effects {
		perID[e.id]++
		if e.key != "" {
			perKey[e.key] = append(perKey[e.key], e.version)
		}
	}
	inbox, err := inboxOutcomes(ctx, st)
	if err != nil {
		return err
	}
	dlq, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: Consumer, All: true})
	if err != nil {
		return err
	}
	parked, err := st.Executor().ParkedList(ctx, store.KeyRef{Consumer: Consumer, Key: ""})
	if err != nil {
		return err
	}

	// The DLQ holds original bytes: every row is byte for byte one of the
	// published messages (the first delivery to fail may be the original
	// or a republished copy). A poison parked behind an earlier poison of
	// its key never failed (it was fixed before it ran) and is not there.
	published := map[string]bool{}
	copies := map[string][]Message{}
	for _, m := range wl.Phase1 {
		published[string(m.Body)] = true
		if m.Kind == Poison || m.Kind == Copy || m.Kind == Republish {
			copies[m.ID] = append(copies[m.ID], m)
		}
	}
	inDLQ := map[string]bool{}
	for _, letter := range dlq {
		inDLQ[letter.ID] = true
		if !published[string(letter.Envelope)] {
			res.fail("DLQ %d (%s): the envelope is not byte for byte a published message", letter.Seq, letter.ID)
		}
	}
	// Every logical effect exactly once.
	for id, n := range perID {
		if n > 1 {
			res.DuplicateEffects += n - 1
			res.fail("%s: applied %d times", id, n)
		}
	}
	seenPair := map[string]bool{}
	for _, m := range append(append([]Message(nil), wl.Phase1...), wl.Phase2...) {
		switch m.Kind {
		case Original, Poison, Flaky:
			if other, ok := wl.Pairs[m.ID]; ok {
				if seenPair[m.ID] {
					continue
				}
				seenPair[m.ID], seenPair[other] = true, true
				res.ExpectedEffects++
				if perID[m.ID]+perID[other] != 1 {
					res.Lost++
					res.fail("%s / %s (same businesskey): %d effects, want 1", m.ID, other, perID[m.ID]+perID[other])
				}
				checkOutcomes(res, inbox, m.ID, other)
				continue
			}
			res.ExpectedEffects++
			if perID[m.ID] == 0 {
				res.Lost++
				res.fail("%s (%s): never applied; inbox says %q", m.ID, m.Kind, inbox[m.ID])
			}
			if m.Kind == Poison && inDLQ[m.ID] && !dlqHoldsAny(dlq, copies[m.ID]) {
				res.fail("%s: the DLQ does not hold the bytes of any of its deliveries", m.ID)
			}
		case Semantic:
			if !seenPair[m.ID] {
				seenPair[m.ID], seenPair[m.Of] = true, true
				res.ExpectedEffects++
				if perID[m.ID]+perID[m.Of] != 1 {
					res.Lost++
					res.fail("%s / %s (same businesskey): %d effects, want 1", m.Of, m.ID, perID[m.ID]+perID[m.Of])
				}
				checkOutcomes(res, inbox, m.Of, m.ID)
			}
		case Late:
			if got := inbox[m.ID]; got != string(seqboxtype.Stale) {
				res.fail("%s (late v%d): outcome %q, want stale", m.ID, m.Version, got)
				if got == "" {
					res.Lost++
				}
			}
			if perID[m.ID] != 0 {
				res.fail("%s (late): applied", m.ID)
			}
		case Collision:
			if !parkedCollision(parked, m.ID) {
				res.fail("%s: collision not parked", m.ID)
			}
		case Malformed:
			if !dlqHolds(dlq, m) {
				res.Lost++
				res.fail("malformed %.40s: not in the DLQ byte for byte", m.Body)
			}
		}
	}
	// Each key's effects in version order, every version once.
	keys := make([]string, 0, len(wl.Final))
	for k := range wl.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vs := perKey[k]
		ok := int64(len(vs)) == wl.Final[k]
		for i, v := range vs {
			ok = ok && v == int64(i+1)
		}
		if !ok {
			res.OrderViolations++
			res.fail("%s: effects in order %s, want 1..%d", k, short(vs), wl.Final[k])
		}
	}
	// Held and blocked messages are accounted for: none may be left.
	for _, p := range parked {
		if p.Reason == seqboxtype.ParkHeld || p.Reason == seqboxtype.ParkBlocked {
			res.fail("%s/%s still %s: %s", p.PartitionKey, p.ID, p.Reason, p.Detail)
		}
	}
	for _, letter := range dlq {
		if letter.State == seqboxtype.DeadLetterOpen && !isRejected(letter.Reason) {
			res.fail("DLQ %d (%s) still open after redrive: %s", letter.Seq, letter.ID, letter.Reason)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	pending, err := q.Pending(pctx)
	cancel()
	if err != nil {
		return err
	}
	if pending != 0 {
		res.fail("queue still holds %d messages", pending)
	}
	return nil
}

func checkOutcomes(res *Result, inbox map[string]string, a, b string) {
	got := []string{inbox[a], inbox[b]}
	sort.Strings(got)
	if got[0] != string(seqboxtype.Applied) || got[1] != string(seqboxtype.SemanticDuplicate) {
		res.fail("%s / %s: outcomes %v, want applied and semantic_duplicate", a, b, got)
	}
}

func dlqHolds(dlq []store.DeadLetter, m Message) bool {
	for _, letter := range dlq {
		if bytes.Equal(letter.Envelope, m.Body) {
			return true
		}
	}
	return false
}

func dlqHoldsAny(dlq []store.DeadLetter, ms []Message) bool {
	for _, m := range ms {
		if dlqHolds(dlq, m) {
			return true
		}
	}
	return false
}

func parkedCollision(parked []store.Parked, id string) bool {
	for _, p := range parked {
		if p.Reason == seqboxtype.ParkCollision && p.ID == id {
			return true
		}
	}
	return false
}

func inboxOutcomes(ctx context.Context, st store.Store) (map[string]string, error) {
	rows, err := st.DB().QueryContext(ctx, `SELECT id, outcome FROM seqbox_inbox WHERE consumer = $1`, Consumer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, o string
		if err := rows.Scan(&id, &o); err != nil {
			return nil, err
		}
		out[id] = o
	}
	return out, rows.Err()
}

func short(vs []int64) string {
	var b strings.Builder
	for i, v := range vs {
		if i == 12 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %d", v)
	}
	return "[" + strings.TrimSpace(b.String()) + "]"
}

// plural is "1 scenario" or "n scenarios".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

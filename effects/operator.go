package effects

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Filter selects ledger rows for List. Zero fields match everything.
type Filter struct {
	Consumer string
	Action   string
	State    State
	// Limit caps the rows returned; default 100.
	Limit int
}

// List returns ledger rows, oldest change first.
func (l *Ledger) List(ctx context.Context, f Filter) ([]Effect, error) {
	if f.State != "" && !validState(f.State) {
		return nil, fmt.Errorf("effects: state %q is not one of pending, succeeded, failed, uncertain", f.State)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{{"consumer", f.Consumer}, {"action", f.Action}} {
		if c.val != "" {
			args = append(args, c.val)
			where = append(where, fmt.Sprintf("%s = $%d", c.col, len(args)))
		}
	}
	// A pending call whose caller's lease ran out is uncertain: it is
	// listed, counted and resolved as one.
	switch f.State {
	case "":
	case Uncertain:
		args = append(args, l.cfg.Now().UnixMicro())
		where = append(where, fmt.Sprintf("(state = 'uncertain' OR (state = 'pending' AND (lease_until IS NULL OR lease_until <= $%d)))", len(args)))
	case Pending:
		args = append(args, l.cfg.Now().UnixMicro())
		where = append(where, fmt.Sprintf("state = 'pending' AND lease_until > $%d", len(args)))
	default:
		args = append(args, f.State)
		where = append(where, fmt.Sprintf("state = $%d", len(args)))
	}
	q := `SELECT ` + effectColumns + ` FROM seqbox_effects`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, f.Limit)
	rows, err := l.db.QueryContext(ctx, q+fmt.Sprintf(` ORDER BY updated_at, idempotency_key LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("effects: list: %w", err)
	}
	defer rows.Close()
	var out []Effect
	for rows.Next() {
		e, err := scanEffect(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l.seen(e))
	}
	return out, rows.Err()
}

// validState reports whether s is one of the ledger's states.
func validState(s State) bool {
	switch s {
	case Pending, Succeeded, Failed, Uncertain:
		return true
	}
	return false
}

// Resolve settles an uncertain call by hand, after an operator checked
// the remote side: succeeded with its reference, or failed (the remote
// side has nothing, so the next attempt calls again). why is kept as the
// row's last error, with who.
func (l *Ledger) Resolve(ctx context.Context, key string, to State, ref, who, why string) error {
	if to != Succeeded && to != Failed {
		return fmt.Errorf("effects: resolve %s to %q: only succeeded or failed", key, to)
	}
	if strings.TrimSpace(who) == "" || strings.TrimSpace(why) == "" {
		return fmt.Errorf("effects: resolve %s: say who resolves it and why", key)
	}
	e, found, err := l.get(ctx, key)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("effects: no call has idempotency key %q", key)
	}
	e = l.seen(e)
	if e.State != Uncertain {
		return fmt.Errorf("effects: %s is %s, not uncertain: nothing to resolve", key, e.State)
	}
	// A dead caller's pending row is settled as an uncertain one (unless
	// its caller came back and reported meanwhile).
	if err := l.settle(ctx, key, Uncertain, "", "a pending call never reported back (its caller's heartbeat stopped)", Pending); err != nil {
		return err
	}
	return l.settle(ctx, key, to, ref, fmt.Sprintf("resolved %s by %s: %s", to, who, why), Uncertain)
}

// UncertainCount is how many calls of one action are uncertain, and since
// when the oldest.
type UncertainCount struct {
	Consumer string
	Action   string
	Count    int
	Oldest   time.Time
}

// Uncertain counts the uncertain calls by consumer and action.
func (l *Ledger) Uncertain(ctx context.Context) ([]UncertainCount, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT consumer, action, COUNT(*), MIN(updated_at) FROM seqbox_effects
		WHERE state = 'uncertain' OR (state = 'pending' AND (lease_until IS NULL OR lease_until <= $1))
		GROUP BY consumer, action ORDER BY consumer, action`, l.cfg.Now().UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("effects: count uncertain: %w", err)
	}
	defer rows.Close()
	var out []UncertainCount
	for rows.Next() {
		var u UncertainCount
		var oldest int64
		if err := rows.Scan(&u.Consumer, &u.Action, &u.Count, &oldest); err != nil {
			return nil, err
		}
		u.Oldest = time.UnixMicro(oldest).UTC()
		out = append(out, u)
	}
	return out, rows.Err()
}

// seen is a row as the operator sees it: a pending call whose caller's
// lease ran out is uncertain.
func (l *Ledger) seen(e Effect) Effect {
	if e.State == Pending && !l.live(e) {
		e.State = Uncertain
		if e.UncertainAt == nil {
			t := e.UpdatedAt
			e.UncertainAt = &t
		}
	}
	return e
}

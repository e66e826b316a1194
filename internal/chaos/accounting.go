package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Accounting is what a consumer's database says of versions that never
// applied: recorded gaps (operator skips and releases, expired holds and
// the advance policy record theirs there) and versions whose event was
// dead-lettered or ended stale, expired or semantic_duplicate (a business
// key's duplicate moves its key to its version without the effect).
type Accounting struct {
	spans map[string][]span
}

// AddGap accounts for versions from..to of key.
func (a *Accounting) AddGap(key string, from, to int64) {
	if a.spans == nil {
		a.spans = map[string][]span{}
	}
	a.spans[key] = append(a.spans[key], span{from, to})
}

// AddVersion accounts for one version of key.
func (a *Accounting) AddVersion(key string, v int64) { a.AddGap(key, v, v) }

// uncovered returns the versions of key within lo..hi that nothing
// accounts for, as sorted ranges.
func (a *Accounting) uncovered(key string, lo, hi int64) []span {
	if lo > hi {
		return nil
	}
	var cover []span
	if a != nil {
		cover = append(cover, a.spans[key]...)
	}
	sort.Slice(cover, func(i, j int) bool { return cover[i].from < cover[j].from })
	var out []span
	next := lo // the lowest version not yet known to be covered
	for _, c := range cover {
		if c.to < next {
			continue
		}
		if c.from > hi {
			break
		}
		if c.from > next {
			out = append(out, span{next, c.from - 1})
		}
		if c.to >= hi {
			return out
		}
		next = c.to + 1
	}
	return append(out, span{next, hi})
}

// loadAccounting reads consumer's accounting from its database: every
// recorded gap, every dead letter (open or resolved), and the inbox's
// stale, expired and semantic_duplicate outcomes. Read it before a purge.
func loadAccounting(ctx context.Context, st store.Store, consumer string) (*Accounting, error) {
	a := &Accounting{}
	gaps, err := st.Executor().GapList(ctx, store.KeyRef{Consumer: consumer})
	if err != nil {
		return nil, fmt.Errorf("gaps: %w", err)
	}
	for _, g := range gaps {
		a.AddGap(g.Key, g.FromVersion, g.ToVersion)
	}
	dlq, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: consumer, All: true})
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	for _, letter := range dlq {
		if letter.PartitionKey != "" && letter.ObjectVersion != nil {
			a.AddVersion(letter.PartitionKey, *letter.ObjectVersion)
		}
	}
	rows, err := st.DB().QueryContext(ctx, `SELECT partitionkey, objectversion FROM seqbox_inbox
		WHERE consumer = $1 AND partitionkey <> '' AND objectversion IS NOT NULL AND outcome IN ($2, $3, $4)`,
		consumer, string(seqboxtype.Stale), string(seqboxtype.Expired), string(seqboxtype.SemanticDuplicate))
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var v int64
		if err := rows.Scan(&key, &v); err != nil {
			return nil, err
		}
		a.AddVersion(key, v)
	}
	return a, rows.Err()
}

// effectHistory reads the record handler's effects of consumer in commit
// order: seqbox_record_effects.n is assigned at insert, and the version gate
// serialises a key's transactions, so a key's rows are in commit order.
// businessKeys gives each identity's business key (the table keeps none).
func effectHistory(ctx context.Context, db *sql.DB, consumer string, businessKeys map[string]string) ([]Apply, error) {
	rows, err := db.QueryContext(ctx, `SELECT source, id, partitionkey, objectversion FROM seqbox_record_effects
		WHERE consumer = $1 ORDER BY n`, consumer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var h []Apply
	for rows.Next() {
		var a Apply
		var v sql.NullInt64
		if err := rows.Scan(&a.Source, &a.ID, &a.Key, &v); err != nil {
			return nil, err
		}
		a.Version, a.Versioned = v.Int64, v.Valid
		a.BusinessKey = businessKeys[a.identity()]
		h = append(h, a)
	}
	return h, rows.Err()
}

// reportHistory records each violation of a history as a failure of res.
func reportHistory(res *Result, what string, violations []string) {
	for _, v := range violations {
		res.HistoryViolations++
		res.fail("%s: %s", what, v)
	}
}

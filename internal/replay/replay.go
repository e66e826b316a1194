package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// maxLine bounds the bytes kept of one input line; a longer line is one
// rejected outcome, with its size in the reason.
const maxLine = seqboxtype.MaxEventSize

// Options are replay's settings beyond the consumer's Config.
type Options struct {
	// State prints one JSON line per key after the counters.
	State bool
}

// Counters are what one replay run saw.
type Counters struct {
	Deliveries, Accepted, Duplicates, InboxRows, BusinessEffects int64
	ByOutcome                                                    map[seqboxtype.Outcome]int64
}

// Line renders the counters line of docs/design.md §17.
func (c Counters) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deliveries=%d accepted=%d duplicates=%d inbox_rows=%d business_effects=%d",
		c.Deliveries, c.Accepted, c.Duplicates, c.InboxRows, c.BusinessEffects)
	for _, o := range seqboxtype.Outcomes() {
		fmt.Fprintf(&b, " %s=%d", o, c.ByOutcome[o])
	}
	return b.String()
}

// Run replays the lines of r through c, whose store is st, writing
// results and counters to w. A retry is redelivered at once until it
// applies or is dead-lettered.
func Run(ctx context.Context, c *seqbox.Consumer, st store.Store, r io.Reader, w io.Writer, opt Options) (Counters, error) {
	cnt := Counters{ByOutcome: map[seqboxtype.Outcome]int64{}}
	db := st.DB()
	if err := EnsureRecordTables(ctx, db); err != nil {
		return cnt, fmt.Errorf("create record tables: %w", err)
	}
	enc := ops.NewJSONEncoder(w)
	enc.SetEscapeHTML(false)
	emit := func(results []seqboxtype.Result) error {
		for _, res := range results {
			cnt.ByOutcome[res.Outcome]++
			if err := enc.Encode(res); err != nil {
				return err
			}
		}
		return nil
	}
	lines := newLineReader(ctx, r, maxLine)
	for {
		l, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return cnt, fmt.Errorf("read input: %w", err)
		}
		if !l.oversized && blank(l.bytes) {
			continue
		}
		if l.oversized {
			cnt.Deliveries++
			results, err := c.DeliverOversized(ctx, seqbox.Oversized{Prefix: l.bytes, Size: l.size, SHA256: l.sum})
			if err != nil {
				return cnt, err
			}
			if err := emit(results); err != nil {
				return cnt, err
			}
			continue
		}
		for attempt := 1; ; attempt++ {
			cnt.Deliveries++
			results, err := c.Deliver(ctx, l.bytes, attempt)
			if err != nil {
				return cnt, err
			}
			if err := emit(results); err != nil {
				return cnt, err
			}
			if results[0].Outcome != seqboxtype.Retry {
				break
			}
		}
	}
	results, err := c.Sweep(ctx)
	if err != nil {
		return cnt, err
	}
	if err := emit(results); err != nil {
		return cnt, err
	}
	cnt.Accepted = cnt.ByOutcome[seqboxtype.Applied]
	cnt.Duplicates = cnt.ByOutcome[seqboxtype.Duplicate]
	counts, err := st.Executor().Counts(ctx, c.Name())
	if err != nil {
		return cnt, err
	}
	cnt.InboxRows = counts.InboxRows
	if cnt.BusinessEffects, err = Effects(ctx, db, c.Name()); err != nil {
		return cnt, err
	}
	if _, err := fmt.Fprintln(w, cnt.Line()); err != nil {
		return cnt, err
	}
	if opt.State {
		return cnt, writeState(ctx, c.Name(), st, w)
	}
	return cnt, nil
}

type stateLine struct {
	PartitionKey string `json:"partitionkey"`
	Version      *int64 `json:"version"`
	State        string `json:"state"`
	Blocked      bool   `json:"blocked"`
	Held         int    `json:"held"`
}

func writeState(ctx context.Context, consumer string, s store.Store, w io.Writer) error {
	keys, err := s.Executor().KeyViewList(ctx, store.KeyViewListParams{Consumer: consumer, Stuck: false})
	if err != nil {
		return err
	}
	enc := ops.NewJSONEncoder(w)
	enc.SetEscapeHTML(false)
	for _, k := range keys {
		st, err := objectState(ctx, s, consumer, k.Key)
		if err != nil {
			return err
		}
		if err := enc.Encode(stateLine{k.Key, k.Version, st, k.Blocked, k.Held}); err != nil {
			return err
		}
	}
	return nil
}

func objectState(ctx context.Context, s store.Store, consumer, key string) (string, error) {
	var st string
	err := s.DB().QueryRowContext(ctx, `SELECT state FROM seqbox_record_objects WHERE consumer = $1 AND partitionkey = $2`,
		consumer, key).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return st, err
}

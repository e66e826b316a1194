package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Key statuses in a KeyReport.
const (
	StatusBlocked = "blocked" // the key is blocked: nothing applies until an operator acts
	StatusHeld    = "held"    // messages wait for a missing version or a retrying predecessor
	StatusOK      = "ok"      // nothing is waiting
	// StatusRetrying is a key whose turn is held by a message that failed
	// and waits to be tried again, with nothing parked behind it (a
	// gateway's next messages of the key wait in its queue).
	StatusRetrying = "retrying"
)

// Blocker is the dead-lettered message a key is blocked behind.
type Blocker struct {
	Source string `json:"source"`
	ID     string `json:"id"`
	// DLQSeq is its open DLQ row (nil when none is open).
	DLQSeq *int64 `json:"dlq_seq"`
	// OpenCall is a call of it through the effects ledger that is pending
	// or uncertain (nil when none is): while it is open the dead letter's
	// skip is refused and a redrive waits on it, so it is the first thing
	// to settle.
	OpenCall *OpenCall `json:"open_call,omitempty"`
}

// OpenCall is a ledger call that may still take effect.
type OpenCall struct {
	IdempotencyKey string `json:"idempotency_key"`
	State          string `json:"state"`
}

// KeyReport is one key as the stuck-keys view shows it: where it is,
// what it waits for, since when, why, and the command that moves it on.
type KeyReport struct {
	PartitionKey string `json:"partitionkey"`
	Status       string `json:"status"`
	// Version is the last committed version; Expected the one that may
	// apply next (for a key blocked by its first message, that message's
	// version; nil when none can: the key has no version yet and takes
	// its first event as its baseline, or Version is math.MaxInt64, which
	// nothing follows); LowestParked the lowest version waiting behind it.
	Version      *int64 `json:"version"`
	Expected     *int64 `json:"expected"`
	LowestParked *int64 `json:"lowest_parked"`
	Held         int    `json:"held"`
	Blocked      bool   `json:"blocked"`
	// BlockedMessages counts the messages parked behind the block.
	BlockedMessages int `json:"blocked_messages"`
	// Since is when the key got stuck: the earlier of when it blocked and
	// when its oldest held or blocked message was parked, so that a hold
	// that turns into a block keeps the time the hold began (and agrees
	// with store.Counts.OldestStuck).
	Since     *string  `json:"since"`
	Reason    string   `json:"reason"`
	BlockedBy *Blocker `json:"blocked_by"`
	// HoldUntil is the hold deadline of the lowest held message.
	HoldUntil *string `json:"hold_until"`
	// Turn is the message whose turn it is on the key, which the held
	// messages wait behind (nil when none holds it).
	Turn   *TurnHolder `json:"turn,omitempty"`
	Action string      `json:"action"`

	since, holdUntil time.Time
}

// TurnHolder is the message holding a key's turn: it is being decided,
// or retries. LastSeen is when it last took its turn or failed; past the
// broker's redelivery window with no decision alive, the sweep ends its
// turn, and an operator may end it sooner with keys release.
type TurnHolder struct {
	Source    string `json:"source"`
	ID        string `json:"id"`
	LastSeen  string `json:"last_seen"`
	LastError string `json:"last_error"`
}

// KeyDetail is one key with everything recorded about it.
type KeyDetail struct {
	KeyReport
	// FirstVersion says where the key's versions start, and by which rule.
	FirstVersion FirstVersionRule
	// Parked is a page of the key's parked messages, in version order;
	// ParkedTotal counts them all, and ParkedNext, when more follow the
	// page, is where the next one starts.
	Parked      []store.Parked
	ParkedTotal int
	ParkedNext  *store.ParkedCursor
	Gaps        []store.Gap
	Audit       []store.AuditRow
}

// ParkedShown is how many parked messages a key's detail carries unless
// asked for another page: a key blocked for a weekend may hold a hundred
// thousand, and `keys show` read and printed them all (10.6 s and 700 MB
// as JSON).
const ParkedShown = 100

// AuditLimit is how many audit rows KeyDetail carries, newest last.
const AuditLimit = 20

// Reporter builds key reports from a consumer's store.
type Reporter struct {
	Op       store.Executor
	Consumer string
	// FirstVersion is the consumer's FirstVersion policy (nil: the first
	// version seen is the baseline).
	FirstVersion *int64
	// Now tells an overdue hold from a running one.
	Now time.Time
	// DB is the --db value the advice commands repeat, so they can be
	// pasted as they are.
	DB string
	// Server, when set, is the --server URL the advice commands carry
	// instead of --db and --consumer (the admin API's reports: the
	// server's own --db path means nothing where the operator is).
	Server string
}

// command builds a command to paste: name, the argument shell-quoted, and
// the flags; an argument that would read as a flag goes last, after "--".
func command(name, arg, flags string) string {
	if strings.HasPrefix(arg, "-") {
		return name + flags + " -- " + shellWord(arg)
	}
	return name + " " + shellWord(arg) + flags
}

// target is the --db and --consumer flags the advice commands carry.
func (r Reporter) target() string {
	if r.Server != "" {
		return " --server " + shellWord(r.Server)
	}
	return " --db " + shellWord(r.DB) + " --consumer " + shellWord(r.Consumer)
}

// Keys reports the stuck keys (blocked or holding), or every key when all
// is true, in key order.
func (r Reporter) Keys(ctx context.Context, all bool) ([]KeyReport, error) {
	views, err := r.Op.KeyViewList(ctx, store.KeyViewListParams{Consumer: r.Consumer, Stuck: !all})
	if err != nil {
		return nil, err
	}
	return r.reports(ctx, views)
}

// SearchKeys reports the keys whose name holds search (case-insensitive;
// every key when empty), the first limit of them (limit > 0) in the order
// an operator looks for one: the exact match first, then the keys stuck
// longest, then the rest in key order; total is how many matched. It
// reads every key's name but the report only of the stuck keys and of
// those it returns: a search over a million keys reported all of them,
// 9–10 s a call and a gigabyte held, to show 200.
func (r Reporter) SearchKeys(ctx context.Context, search string, limit int) (reps []KeyReport, total int, err error) {
	names, err := r.Op.KeyNameList(ctx, store.KeyNameListParams{Consumer: r.Consumer})
	if err != nil {
		return nil, 0, err
	}
	needle := strings.ToLower(search)
	matched := names[:0]
	for _, name := range names {
		if strings.Contains(strings.ToLower(name), needle) {
			matched = append(matched, name)
		}
	}
	stuck, err := r.Keys(ctx, false)
	if err != nil {
		return nil, 0, err
	}
	known := make(map[string]KeyReport, len(stuck))
	for _, rep := range stuck {
		known[rep.PartitionKey] = rep
	}
	exact := func(name string) bool { return search != "" && strings.EqualFold(name, search) }
	slices.SortStableFunc(matched, func(a, b string) int {
		if ea, eb := exact(a), exact(b); ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		return olderFirst(known[a].since, known[b].since)
	})
	total = len(matched)
	if limit > 0 && len(matched) > limit {
		matched = matched[:limit]
	}
	var more []string
	for _, name := range matched {
		if _, ok := known[name]; !ok {
			more = append(more, name)
		}
	}
	if len(more) > 0 {
		views, err := r.Op.KeyViewList(ctx, store.KeyViewListParams{Consumer: r.Consumer, Keys: more})
		if err != nil {
			return nil, 0, err
		}
		rest, err := r.reports(ctx, views)
		if err != nil {
			return nil, 0, err
		}
		for _, rep := range rest {
			known[rep.PartitionKey] = rep
		}
	}
	reps = make([]KeyReport, 0, len(matched))
	for _, name := range matched {
		if rep, ok := known[name]; ok { // a key removed since its name was read is left out
			reps = append(reps, rep)
		}
	}
	return reps, total, nil
}

// olderFirst orders two keys by how long they have been stuck, the
// longest first; a key with no such time (not stuck) goes after.
func olderFirst(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return 1
	case b.IsZero():
		return -1
	}
	return a.Compare(b)
}

// reports reports views, in their order.
func (r Reporter) reports(ctx context.Context, views []store.KeyView) ([]KeyReport, error) {
	dlq, err := r.openDeadLetters(ctx, views)
	if err != nil {
		return nil, err
	}
	out := make([]KeyReport, 0, len(views))
	// quiet are the keys with nothing parked and no block, whose turn a
	// message may still hold: in the stuck list (all false), those listed
	// for a retrying turn holder alone.
	var quiet []string
	for _, v := range views {
		rep, err := r.report(ctx, v, dlq, nil)
		if err != nil {
			return nil, err
		}
		if rep.Status == StatusOK {
			quiet = append(quiet, rep.PartitionKey)
		}
		out = append(out, rep)
	}
	if len(quiet) == 0 {
		return out, nil
	}
	// One read for all of them; only a key with a row is looked at again
	// (RetryOnKey tells a live turn from a settled identity's row).
	rows, err := r.Op.RetryRowsOnKeys(ctx, store.KeysRef{Consumer: r.Consumer, Keys: quiet})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if _, ok := rows[out[i].PartitionKey]; ok && out[i].Status == StatusOK {
			if err := r.turnWithNothingBehind(ctx, &out[i]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// turnWithNothingBehind names, on rep, a message that holds its key's
// turn with nothing parked behind it (retrying, being decided, or gone
// with its call open), with its way out, as keys release ends it. A
// holder that failed and waits to be retried makes the key's status
// retrying; one being decided leaves it ok.
func (r Reporter) turnWithNothingBehind(ctx context.Context, rep *KeyReport) error {
	t, err := r.Op.RetryOnKey(ctx, store.KeyRef{Consumer: r.Consumer, Key: rep.PartitionKey})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	key := rep.PartitionKey
	rep.Turn = &TurnHolder{Source: t.Source, ID: t.ID, LastSeen: timeText(t.At), LastError: t.Error}
	rep.Reason = fmt.Sprintf("%s/%s holds the key's turn (last seen %s)", t.Source, t.ID, timeText(t.At))
	if t.Error != "" {
		rep.Status = StatusRetrying
		rep.Reason = fmt.Sprintf("%s/%s holds the key's turn and retries (last failed %s: %s)", t.Source, t.ID, timeText(t.At), t.Error)
	}
	rep.Action = fmt.Sprintf("wait for %s/%s (retrying, or being decided); should it never come back: %s "+
		"(refused while a call of it is open: resolve that call first, seqbox effects resolve)",
		t.Source, t.ID, command("seqbox keys release", key, " --by WHO --reason WHY"+r.target()))
	return nil
}

// Key reports one key with its first ParkedShown parked messages,
// recorded gaps and the last AuditLimit audit rows. An unknown key is
// store.ErrNotFound.
func (r Reporter) Key(ctx context.Context, key string) (KeyDetail, error) {
	return r.KeyPage(ctx, key, nil, ParkedShown)
}

// KeyPage is Key with a page of at most limit parked messages, from after
// the cursor after (nil: from the first).
func (r Reporter) KeyPage(ctx context.Context, key string, after *store.ParkedCursor, limit int) (KeyDetail, error) {
	v, err := r.Op.KeyViewGet(ctx, store.KeyRef{Consumer: r.Consumer, Key: key})
	if err != nil {
		return KeyDetail{}, err
	}
	dlq, err := r.openDeadLetters(ctx, []store.KeyView{v})
	if err != nil {
		return KeyDetail{}, err
	}
	d := KeyDetail{ParkedTotal: v.Parked}
	// One more than the page says whether another follows.
	if d.Parked, err = r.Op.ParkedPage(ctx, store.ParkedPageParams{Consumer: r.Consumer, Key: key, After: after, Limit: limit + 1}); err != nil {
		return d, err
	}
	if len(d.Parked) > limit {
		d.Parked = d.Parked[:limit]
		d.ParkedNext = store.ParkedCursorOf(d.Parked[limit-1])
	}
	if d.KeyReport, err = r.report(ctx, v, dlq, d.Parked); err != nil {
		return d, err
	}
	if d.Status == StatusOK {
		if err := r.turnWithNothingBehind(ctx, &d.KeyReport); err != nil {
			return d, err
		}
	}
	d.FirstVersion = firstVersionRule(r.FirstVersion, v.Baseline)
	if d.Gaps, err = r.Op.GapList(ctx, store.KeyRef{Consumer: r.Consumer, Key: key}); err != nil {
		return d, err
	}
	d.Audit, err = r.Op.AuditList(ctx, store.AuditListParams{Consumer: r.Consumer, Key: key, Limit: AuditLimit})
	return d, err
}

// openDeadLetters maps the identity of each open DLQ row to the row, when
// some key is blocked behind a message.
func (r Reporter) openDeadLetters(ctx context.Context, views []store.KeyView) (map[[2]string]store.DeadLetter, error) {
	need := false
	for _, v := range views {
		need = need || (v.Blocked && v.BlockedID != "")
	}
	if !need {
		return nil, nil
	}
	letters, err := r.Op.DeadLetterList(ctx, store.DeadLetterListParams{Consumer: r.Consumer, All: false})
	if err != nil {
		return nil, err
	}
	m := make(map[[2]string]store.DeadLetter, len(letters))
	for _, letter := range letters {
		m[[2]string{letter.Source, letter.ID}] = letter // oldest first: the latest open row wins
	}
	return m, nil
}

// report builds one KeyReport; parked may be nil and is read when a held
// key needs it.
func (r Reporter) report(ctx context.Context, v store.KeyView, dlq map[[2]string]store.DeadLetter, parked []store.Parked) (KeyReport, error) {
	rep := KeyReport{PartitionKey: v.Key, Status: StatusOK, Version: v.Version, LowestParked: v.NextVersion,
		Held: v.Held, Blocked: v.Blocked, BlockedMessages: v.BlockedCount}
	switch {
	case v.Version != nil && *v.Version == math.MaxInt64:
		// No version follows the largest: nothing is expected (version+1
		// would wrap to a negative number).
	case v.Version != nil:
		e := *v.Version + 1
		rep.Expected = &e
	case r.FirstVersion != nil:
		e := *r.FirstVersion
		rep.Expected = &e
	}
	switch {
	case v.Blocked:
		rep.Status, rep.since, rep.Reason = StatusBlocked, earliest(v.BlockedSince, v.OldestParked), v.BlockedReason
		if v.BlockedID != "" {
			rep.BlockedBy = &Blocker{Source: v.BlockedSource, ID: v.BlockedID}
			if letter, ok := dlq[[2]string{v.BlockedSource, v.BlockedID}]; ok {
				rep.BlockedBy.DLQSeq = &letter.Seq
				if v.Version == nil && rep.Expected == nil {
					// Blocked by its first message: that message's version
					// is the one that may apply next.
					rep.Expected = letter.ObjectVersion
				}
				call, err := r.Op.LedgerOpen(ctx, store.MessageRef{Consumer: r.Consumer, Source: v.BlockedSource, ID: v.BlockedID})
				if err == nil {
					rep.BlockedBy.OpenCall = &OpenCall{IdempotencyKey: call.IdempotencyKey, State: call.State}
				} else if !errors.Is(err, store.ErrNotFound) {
					return rep, err
				}
			}
		}
		rep.Action = blockedAction(rep, r.target())
	case v.Held > 0:
		rep.Status, rep.since = StatusHeld, v.OldestParked
		held, err := r.firstHeld(ctx, v.Key, parked)
		if err != nil {
			return rep, err
		}
		if held != nil {
			rep.Reason, rep.holdUntil = held.Detail, held.HoldUntil
		}
		t, err := r.Op.RetryOnKey(ctx, store.KeyRef{Consumer: r.Consumer, Key: v.Key})
		if err == nil {
			rep.Turn = &TurnHolder{Source: t.Source, ID: t.ID, LastSeen: timeText(t.At), LastError: t.Error}
		} else if !errors.Is(err, store.ErrNotFound) {
			return rep, err
		}
		rep.Action = r.holdAdvice(rep)
	default:
		rep.since = v.OldestParked
	}
	rep.Since, rep.HoldUntil = jsonTime(rep.since), jsonTime(rep.holdUntil)
	return rep, nil
}

// ParkedCursorText writes a cursor as the admin API and the CLI show
// it, VERSION:SEQ (nil for nil).
func ParkedCursorText(c *store.ParkedCursor) *string {
	if c == nil {
		return nil
	}
	s := strconv.FormatInt(c.Version, 10) + ":" + strconv.FormatInt(c.Seq, 10)
	return &s
}

// ParseParkedCursor reads a cursor ParkedCursorText wrote.
func ParseParkedCursor(s string) (*store.ParkedCursor, error) {
	v, seq, ok := strings.Cut(s, ":")
	version, err1 := strconv.ParseInt(v, 10, 64)
	n, err2 := strconv.ParseInt(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil || version < -1 || n < 1 {
		return nil, fmt.Errorf("%q is not VERSION:SEQ (a version, -1 for none, and a parked message's seq)", s)
	}
	return &store.ParkedCursor{Version: version, Seq: n}, nil
}

// firstHeld is a key's held message of lowest version: the first held one
// of parked (a page from the first), else read alone (nil when none).
func (r Reporter) firstHeld(ctx context.Context, key string, parked []store.Parked) (*store.Parked, error) {
	for i := range parked {
		if parked[i].Reason == seqboxtype.ParkHeld {
			return &parked[i], nil
		}
	}
	held, err := r.Op.ParkedPage(ctx, store.ParkedPageParams{Consumer: r.Consumer, Key: key, Reason: seqboxtype.ParkHeld, Limit: 1})
	if err != nil || len(held) == 0 {
		return nil, err
	}
	return &held[0], nil
}

// earliest is the earlier of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// blockedAction is the command that unsticks a blocked key, with target
// (the flags that reach the consumer) after each command: redrive the
// dead letter it is blocked behind, or release it.
func blockedAction(rep KeyReport, target string) string {
	if b := rep.BlockedBy; b != nil && b.DLQSeq != nil && b.OpenCall != nil {
		// The skip is refused and a redrive fails again while the call is
		// open: what the remote side shows settles it first.
		if b.OpenCall.State != "uncertain" {
			return fmt.Sprintf("wait: its call %s is %s (a caller may still be running it; it turns uncertain if that caller is gone), "+
				"then redrive or skip dead letter %d", b.OpenCall.IdempotencyKey, b.OpenCall.State, *b.DLQSeq)
		}
		return fmt.Sprintf("check the remote side for call %s, then seqbox effects resolve %s --state succeeded --ref REF|--state failed "+
			"--by WHO --reason WHY%s, then seqbox dlq redrive %d%s (skip and redrive are refused or fail while the call is uncertain)",
			b.OpenCall.IdempotencyKey, shellWord(b.OpenCall.IdempotencyKey), target, *b.DLQSeq, target)
	}
	if b := rep.BlockedBy; b != nil && b.DLQSeq != nil {
		// One command to paste; the alternative follows as a shell comment.
		return fmt.Sprintf("seqbox dlq redrive %d%s  # or: seqbox dlq skip %d --by WHO --reason WHY%s",
			*b.DLQSeq, target, *b.DLQSeq, target)
	}
	return command("seqbox keys release", rep.PartitionKey, " --by WHO --reason WHY"+target)
}

func (r Reporter) holdAdvice(rep KeyReport) string {
	if t := rep.Turn; t != nil {
		// The hold expiry does not pass over a turn whose message may
		// still come back: name it, and the way out should it not.
		return fmt.Sprintf("wait for %s/%s, which holds the key's turn (last seen %s); "+
			"the sweep ends its turn once the broker's redelivery window passes without it, or: %s",
			t.Source, t.ID, t.LastSeen, command("seqbox keys release", rep.PartitionKey, " --by WHO --reason WHY"+r.target()))
	}
	if rep.holdUntil.IsZero() {
		return "wait: unparked when the retrying predecessor reaches a final outcome"
	}
	what := "the missing version"
	if rep.Expected != nil {
		what = "version " + strconv.FormatInt(*rep.Expected, 10)
	}
	s := fmt.Sprintf("wait for %s until %s", what, timeText(rep.holdUntil))
	if !r.Now.IsZero() && !r.Now.Before(rep.holdUntil) {
		s += " (overdue: the next sweep applies the hold expiry)"
	}
	return s
}

// WriteKeys prints key reports: a table, or JSON.
func WriteKeys(w io.Writer, reps []KeyReport, out Format) error {
	if out.Structured() {
		return WriteRows(w, out, reps)
	}
	t := newTable(w, "PARTITIONKEY", "STATUS", "VERSION", "EXPECTED", "LOWEST_PARKED", "HELD", "BLOCKED_MESSAGES",
		"SINCE", "REASON", "ACTION")
	for _, r := range reps {
		t.row(r.PartitionKey, r.Status, version(r.Version), version(r.Expected), version(r.LowestParked),
			strconv.Itoa(r.Held), strconv.Itoa(r.BlockedMessages), timeText(r.since), r.Reason, r.Action)
	}
	return t.flush()
}

// WriteKey prints one key in full, as text. Its JSON is the key's report
// and the admin API's view of what is recorded about it
// (serve.KeyRecordOf).
func WriteKey(w io.Writer, d KeyDetail) error {
	r := d.KeyReport
	f := newFields(w)
	f.add("partitionkey", r.PartitionKey)
	f.add("status", r.Status)
	f.add("version", version(r.Version))
	f.add("expected", version(r.Expected))
	f.add("lowest_parked", version(r.LowestParked))
	f.add("first_version", d.FirstVersion.Says)
	f.add("held", strconv.Itoa(r.Held))
	f.add("blocked", strconv.FormatBool(r.Blocked))
	f.add("blocked_messages", strconv.Itoa(r.BlockedMessages))
	f.add("since", timeText(r.since))
	f.add("reason", r.Reason)
	if b := r.BlockedBy; b != nil {
		by := fmt.Sprintf("source=%s id=%s", b.Source, b.ID)
		if b.DLQSeq != nil {
			by += fmt.Sprintf(" dlq=%d", *b.DLQSeq)
		}
		f.add("blocked_by", by)
	} else {
		f.add("blocked_by", "")
	}
	f.add("hold_until", timeText(r.holdUntil))
	f.add("action", r.Action)
	if err := f.flush(); err != nil {
		return err
	}

	title := "parked"
	if d.ParkedNext != nil || len(d.Parked) < d.ParkedTotal {
		title = fmt.Sprintf("parked (%d of %d shown; --parked N shows more)", len(d.Parked), d.ParkedTotal)
	}
	if err := section(w, title, len(d.Parked)); err != nil {
		return err
	}
	if len(d.Parked) > 0 {
		t := newTable(w, "SEQ", "SOURCE", "ID", "OBJECTVERSION", "REASON", "PARKED_AT", "HOLD_UNTIL", "DETAIL")
		for _, p := range d.Parked {
			t.row(strconv.FormatInt(p.Seq, 10), p.Source, p.ID, version(p.ObjectVersion), string(p.Reason),
				timeText(p.ParkedAt), timeText(p.HoldUntil), p.Detail)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if err := section(w, "gaps", len(d.Gaps)); err != nil {
		return err
	}
	if len(d.Gaps) > 0 {
		t := newTable(w, "FROM_VERSION", "TO_VERSION", "DECIDED_BY", "REASON", "AT")
		for _, g := range d.Gaps {
			t.row(strconv.FormatInt(g.FromVersion, 10), strconv.FormatInt(g.ToVersion, 10), g.DecidedBy, g.Reason,
				timeText(g.At))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if err := section(w, fmt.Sprintf("audit (last %d)", AuditLimit), len(d.Audit)); err != nil {
		return err
	}
	if len(d.Audit) > 0 {
		t := newTable(w, "SEQ", "AT", "SOURCE", "ID", "RECEIVED", "CURRENT", "OUTCOME", "REASON", "NEXT_ACTION")
		for _, a := range d.Audit {
			t.row(strconv.FormatInt(a.Seq, 10), timeText(a.At), a.Source, a.ID, version(a.ReceivedVersion),
				version(a.CurrentVersion), string(a.Outcome), a.Reason, a.NextAction)
		}
		return t.flush()
	}
	return nil
}

// section starts a titled block after a blank line; an empty one says so.
func section(w io.Writer, title string, n int) error {
	if n == 0 {
		_, err := fmt.Fprintf(w, "\n%s: none\n", title)
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s:\n", title)
	return err
}

// FirstVersionRule is where a key's versions start: a FirstVersion the
// consumer configured, or, without one, the first version seen (the
// key's baseline; a lower version that comes after it is stale).
type FirstVersionRule struct {
	// Rule is "configured" or "first_seen".
	Rule string `json:"rule"`
	// Version is the configured first version, or the key's baseline
	// (nil while the key has none, or kept none: it committed before
	// seqbox kept baselines).
	Version *int64 `json:"version"`
	// Says is the rule in words, for people.
	Says string `json:"says"`
}

// firstVersionRule is the rule for a key whose baseline is baseline under
// the consumer's FirstVersion policy.
func firstVersionRule(configured, baseline *int64) FirstVersionRule {
	if configured != nil {
		return FirstVersionRule{Rule: "configured", Version: configured,
			Says: fmt.Sprintf("configured: the key starts at version %d; a later version that comes first is held until it arrives", *configured)}
	}
	r := FirstVersionRule{Rule: "first_seen", Version: baseline,
		Says: "the first version seen starts the key (no first version configured); a lower version that comes later is stale"}
	if baseline != nil {
		r.Says = fmt.Sprintf("version %d, the first seen, started the key (no first version configured); a lower version that came later is stale", *baseline)
	}
	return r
}

package kafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// topicPartition names one partition.
type topicPartition struct {
	topic string
	part  int32
}

// partition is what a member knows about one partition of its topic. It
// lives as long as the member: ownership comes and goes with rebalances,
// and each assignment bumps epoch, so a delivery from an earlier
// assignment can tell that its lease is lost.
type partition struct {
	tp    topicPartition
	owned bool
	epoch uint64
	// committed is the offset the group has committed (the next record to
	// consume), -1 when none; next is where the contiguous prefix of
	// acknowledged records ends, the offset the next commit writes.
	committed, next int64
	// pending are the records received in this assignment and not yet
	// part of the acknowledged prefix, in offset order.
	pending []*entry
	// attempts counts deliveries per offset, in this member and, for the
	// records the commit metadata speaks of, before it.
	attempts map[int64]int
	// meta is the attempt record the group's committed offset carries, as
	// this member last read or wrote it; prev is what it said when this
	// member was assigned the partition (earlier owners' deliveries).
	meta, prev attemptRecord
	// through is one past the highest offset this member handed out (or
	// an earlier owner recorded as handed out).
	through int64
}

// entry is one received record, handed out once or more.
type entry struct {
	rec   *kgo.Record
	p     *partition
	epoch uint64
	acked bool
	// seq numbers the entry's deliveries; a settle from an earlier one
	// (after a nack handed it out again) does not nack it twice.
	seq int
	// waiting is set while the entry sits in the ready queue, due at due.
	waiting bool
	due     time.Time
}

// current reports whether the entry still needs delivering by this
// member: not acknowledged, and its partition still in the assignment it
// was fetched in.
func (e *entry) current() bool { return !e.acked && e.p.owned && e.epoch == e.p.epoch }

// attemptRecord is the commit metadata seqbox writes with every offset
// commit: how many times the record at the committed offset (the head)
// was handed out, and one past the highest offset any member handed out.
// A member that is assigned the partition reads it, so a record a dead
// member held comes back with a higher Attempt, and a record that kills
// every member that takes it (a crash loop) counts up across members.
type attemptRecord struct {
	head    int64
	count   int
	through int64
}

const metaPrefix = "seqbox1"

func (a attemptRecord) String() string {
	return fmt.Sprintf("%s head=%d n=%d through=%d", metaPrefix, a.head, a.count, a.through)
}

// parseAttemptRecord reads metadata written by String; anything else (an
// empty string, another client's member id) is no record.
func parseAttemptRecord(s string) attemptRecord {
	var a attemptRecord
	if _, err := fmt.Sscanf(s, metaPrefix+" head=%d n=%d through=%d", &a.head, &a.count, &a.through); err != nil {
		return attemptRecord{head: -1, through: -1}
	}
	return a
}

func newPartition(tp topicPartition) *partition {
	return &partition{tp: tp, committed: -1, next: -1, attempts: map[int64]int{},
		meta: attemptRecord{head: -1, through: -1}, prev: attemptRecord{head: -1, through: -1}, through: -1}
}

// assign starts a new assignment at the committed offset with the attempt
// record the group holds.
func (p *partition) assign(committed int64, rec attemptRecord) {
	p.owned = true
	p.epoch++
	p.committed, p.next = committed, committed
	p.pending = nil
	p.meta, p.prev = rec, rec
	p.through = max(p.through, rec.through)
}

// revoke ends the assignment: every delivery of it has lost its lease.
func (p *partition) revoke() {
	p.owned = false
	p.epoch++
	p.pending = nil
}

// add registers a fetched record of the current assignment.
func (p *partition) add(rec *kgo.Record) *entry {
	if len(p.pending) == 0 && rec.Offset > p.next {
		// Nothing is outstanding and the log has nothing before rec
		// (no commit yet, or offsets skipped by compaction or
		// transaction markers): the prefix starts at rec.
		p.next = rec.Offset
	}
	e := &entry{rec: rec, p: p, epoch: p.epoch}
	p.pending = append(p.pending, e)
	return e
}

// nextAttempt is the Attempt the next delivery of offset o reports: one
// more than this member has seen, and at least what earlier owners
// recorded (exactly for the head; at least one delivery for any record
// before the recorded high-water mark).
func (p *partition) nextAttempt(o int64) int {
	n := p.attempts[o]
	switch {
	case o == p.prev.head:
		n = max(n, p.prev.count)
	case o > p.prev.head && o < p.prev.through:
		n = max(n, 1)
	}
	return n + 1
}

// advance moves next past the acknowledged prefix of pending.
func (p *partition) advance() {
	i := 0
	for i < len(p.pending) && p.pending[i].acked {
		p.next = p.pending[i].rec.Offset + 1
		i++
	}
	p.pending = p.pending[i:]
}

// record is the attempt record a commit at next writes now.
func (p *partition) record() attemptRecord {
	return attemptRecord{head: p.next, count: p.attempts[p.next], through: p.through}
}

// needsCommit reports whether the broker is behind what this member
// knows: the acknowledged prefix moved, or deliveries were handed out
// that the attempt record does not show yet.
func (p *partition) needsCommit() bool {
	if !p.owned || p.next < 0 {
		return false
	}
	return p.next != p.committed || p.record() != p.meta
}

// committedAt records a successful commit.
func (p *partition) committedAt(offset int64, rec attemptRecord) {
	p.committed, p.meta = offset, rec
	for o := range p.attempts {
		if o < offset {
			delete(p.attempts, o)
		}
	}
}

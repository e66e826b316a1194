package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// onAssigned starts an assignment: each partition starts at the group's
// committed offset with the attempt record committed with it.
func (t *Transport) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	defer t.joinedOnce.Do(func() { close(t.joined) })
	if len(assigned) == 0 {
		return
	}
	offs, err := t.fetchCommitted(ctx, cl)
	if err != nil {
		t.cfg.Logger.Warn("kafka: reading committed offsets failed; attempts restart at 1 for this assignment",
			"group", t.cfg.Group, "err", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, parts := range assigned {
		for _, part := range parts {
			tp := topicPartition{topic, part}
			p := t.parts[tp]
			if p == nil {
				p = newPartition(tp)
				t.parts[tp] = p
			}
			committed, rec := int64(-1), attemptRecord{head: -1, through: -1}
			if o, ok := offs.Lookup(topic, part); ok && o.Err == nil && o.At >= 0 {
				committed, rec = o.At, parseAttemptRecord(o.Metadata)
			}
			p.assign(committed, rec)
		}
	}
}

// onRevoked ends the assignment of the revoked partitions: the
// acknowledged prefix is committed one last time, and every delivery of
// them still in flight has lost its lease (its Ack reports ErrLeaseLost,
// and the next owner reads the record from the committed offset). It
// waits for a commit in progress, so none is sent after it.
func (t *Transport) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	plans := t.endAssignment(revoked, true)
	if len(plans) > 0 {
		t.send(context.WithoutCancel(ctx), cl, plans)
	}
	t.commitMu.Unlock()
}

// onLost ends the assignment of partitions the member lost without a
// clean revoke (its session expired): another member may already own
// them, so nothing is committed.
func (t *Transport) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	t.endAssignment(lost, false)
	t.commitMu.Unlock()
}

// endAssignment revokes the partitions and returns, when commit is set,
// the commits they still need. It returns with t.commitMu held.
func (t *Transport) endAssignment(ended map[string][]int32, commit bool) []commitPlan {
	t.commitMu.Lock()
	t.mu.Lock()
	defer t.mu.Unlock()
	var ps []*partition
	for topic, parts := range ended {
		for _, part := range parts {
			if p := t.parts[topicPartition{topic, part}]; p != nil && p.owned {
				ps = append(ps, p)
			}
		}
	}
	var plans []commitPlan
	if commit {
		plans = planLocked(ps)
	}
	for _, p := range ps {
		p.revoke()
	}
	return plans
}

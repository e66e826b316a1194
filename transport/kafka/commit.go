package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrCommit wraps a failed offset commit: the acknowledgement is recorded
// in this member and goes out with its next commit, but until one
// succeeds the records may be delivered again (to this member's
// successor), and the inbox absorbs that.
var ErrCommit = errors.New("kafka: offset commit failed")

// commitPlan is one partition's part of an offset commit.
type commitPlan struct {
	p      *partition
	epoch  uint64
	offset int64
	rec    attemptRecord
}

// planLocked lists the commits the partitions need; t.mu is held.
func planLocked(ps []*partition) []commitPlan {
	var plans []commitPlan
	for _, p := range ps {
		if p.needsCommit() {
			plans = append(plans, commitPlan{p: p, epoch: p.epoch, offset: p.next, rec: p.record()})
		}
	}
	return plans
}

// commitOwned commits what every owned partition needs, in one request,
// and returns the partitions whose commit failed.
func (t *Transport) commitOwned(ctx context.Context) map[*partition]error {
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	ps := make([]*partition, 0, len(t.parts))
	for _, p := range t.parts {
		ps = append(ps, p)
	}
	plans := planLocked(ps)
	t.mu.Unlock()
	return t.send(ctx, t.cl, plans)
}

// send issues one synchronous OffsetCommit for plans, under the member's
// current generation (the broker refuses it from a member that was fenced
// by a rebalance), with each partition's attempt record as its metadata.
// t.commitMu is held, so commits leave this member in order.
func (t *Transport) send(ctx context.Context, cl *kgo.Client, plans []commitPlan) map[*partition]error {
	if len(plans) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.CommitTimeout)
	defer cancel()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	meta := map[topicPartition]string{}
	for _, pl := range plans {
		if offsets[pl.p.tp.topic] == nil {
			offsets[pl.p.tp.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[pl.p.tp.topic][pl.p.tp.part] = kgo.EpochOffset{Epoch: -1, Offset: pl.offset}
		meta[pl.p.tp] = pl.rec.String()
	}
	withMeta := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				if m, ok := meta[topicPartition{req.Topics[i].Topic, req.Topics[i].Partitions[j].Partition}]; ok {
					req.Topics[i].Partitions[j].Metadata = &m
				}
			}
		}
		return nil
	})
	failed := map[*partition]error{}
	var reqErr error
	byTP := map[topicPartition]error{}
	cl.CommitOffsetsSync(withMeta, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			reqErr = err
			return
		}
		names := map[[16]byte]string{} // v10+ answers by topic id
		for _, rt := range req.Topics {
			names[rt.TopicID] = rt.Topic
		}
		for _, rt := range resp.Topics {
			topic := cmp.Or(rt.Topic, names[rt.TopicID])
			for _, rp := range rt.Partitions {
				byTP[topicPartition{topic, rp.Partition}] = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pl := range plans {
		err, answered := byTP[pl.p.tp]
		switch {
		case reqErr != nil:
			err = reqErr
		case !answered:
			err = errors.New("no answer for the partition")
		}
		if err != nil {
			failed[pl.p] = fmt.Errorf("%w: %s[%d] at offset %d: %w", ErrCommit, pl.p.tp.topic, pl.p.tp.part, pl.offset, err)
			continue
		}
		if pl.p.epoch == pl.epoch {
			pl.p.committedAt(pl.offset, pl.rec)
		}
	}
	if len(failed) > 0 {
		t.cfg.Logger.Warn("kafka: offset commit failed; the records may be delivered again and the inbox absorbs that",
			"group", t.cfg.Group, "err", errors.Join(mapValues(failed)...))
	}
	return failed
}

// fetchCommitted reads the group's committed offsets and attempt records
// for the partitions just assigned.
func (t *Transport) fetchCommitted(ctx context.Context, cl *kgo.Client) (kadm.OffsetResponses, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.CommitTimeout)
	defer cancel()
	return kadm.NewClient(cl).FetchOffsets(ctx, t.cfg.Group)
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

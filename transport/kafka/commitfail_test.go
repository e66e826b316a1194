package kafka_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failCommits makes the broker refuse every offset commit that moves an
// offset past the start of a partition, while failing is set; commits
// that only record attempts at offset 0 go through. It returns how many
// it refused.
func failCommits(c *kfake.Cluster, failing *atomic.Bool) *atomic.Int64 {
	var refused atomic.Int64
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		oc := req.(*kmsg.OffsetCommitRequest)
		moves := false
		for _, rt := range oc.Topics {
			for _, rp := range rt.Partitions {
				moves = moves || rp.Offset > 0
			}
		}
		if !failing.Load() || !moves {
			return nil, nil, false // the broker handles it
		}
		refused.Add(1)
		resp := oc.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range oc.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownServerError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &refused
}

// TestFailedCommitAppliesNothingTwice: the broker refuses the offset
// commits that follow the database COMMIT. The acknowledgements report
// ErrCommit; the member that applied the records goes away with nothing
// committed, so its successor receives them again, and the inbox marks
// every copy a duplicate: nothing is applied twice. Once commits succeed
// again, everything is applied and committed: a new member receives
// nothing, so nothing is lost either.
func TestFailedCommitAppliesNothingTwice(t *testing.T) {
	r := newRig(t, 2)
	const keys, versions = 4, 5
	n := publishAll(t, r.publisher(t), keys, versions)
	var failing atomic.Bool
	failing.Store(true)
	refused := failCommits(r.srv.Cluster(), &failing)
	fx := newEffects(t)

	first := &watched{Transport: r.open(t, "commit-fails"), received: make(chan struct{})}
	stop := running(t, fx.consumer(t, first, nil))
	waitfor.That(t, 30*time.Second, "an acknowledgement to report a failed commit", func() bool { return first.failed.Load() > 0 })
	stop()
	_, before := fx.Applied(t)
	if before == 0 {
		t.Fatal("nothing was applied while commits failed")
	}
	if err := first.Close(); err != nil { // its last commit, on revoke, fails too
		t.Fatalf("close: %v", err)
	}
	failing.Store(false)

	second := r.open(t, "commit-fails")
	stop = running(t, fx.consumer(t, second, nil))
	fx.waitApplied(t, n, 60*time.Second)
	r.waitCommitted(t, "commit-fails", 60*time.Second)
	stop()
	got, applied := fx.Applied(t)
	if applied != n {
		t.Fatalf("%d effects for %d messages", applied, n)
	}
	inOrder(t, got, keys, versions)
	if d := fx.outcome(seqboxtype.Duplicate); d < before {
		t.Fatalf("%d messages were applied before the failed commits, but only %d redeliveries were duplicates", before, d)
	}
	if err := second.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	quietFor(t, r.open(t, "commit-fails"), 2*time.Second)
	t.Logf("%d commits refused; %d applied before, %d duplicates absorbed", refused.Load(), before, fx.outcome(seqboxtype.Duplicate))
}

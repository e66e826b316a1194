package kafka

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seqbox/seqbox/internal/waitfor"
)

// A member that dies while its JoinGroup waits in a rebalance: when the
// rebalance completes, kfake answers it on its closed connection, and its
// reply picks at random between the closed connection and the write (a
// select with both ready), so about half the time it arms no session
// timer and the group goes stable with the dead member holding a
// partition for good. The test makes such a zombie with the watch paused
// (dead joiners until one stays past its session and rebalance
// timeouts), then resumes the watch: the zombie is removed, as a real
// broker would, and the live member gets its partition back.
func TestDeadJoinerExpires(t *testing.T) {
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sessions.paused.Store(true)
	members := liveMember(t, s)
	zombie := false
	for attempt := 0; attempt < 20 && !zombie; attempt++ {
		id := dieWhileJoining(t, s)
		// The rebalance completes with the dead joiner in the group: the
		// live member alone with both partitions no longer.
		if !waitfor.Until(30*time.Second, func() bool { return len(members()) == 2 }) {
			t.Logf("dead joiner %s never made the group stable with two members", id)
			continue
		}
		// Then kfake either expires it itself (the live member is alone
		// again), or keeps it while the watch has heard nothing from it for
		// longer than its session (1s) and rebalance (2s) timeouts
		// together: a zombie.
		waitfor.That(t, 30*time.Second, "kfake to drop the dead joiner or keep it past its session", func() bool {
			if got := members(); len(got) == 1 && got[0] == "0,1" {
				return true
			}
			zombie = keptSilent(t, s, "g", id)
			return zombie
		})
	}
	if !zombie {
		t.Fatal("kfake expired 20 dead joiners of 20 itself: if it is fixed upstream, the session watch can go")
	}
	s.sessions.paused.Store(false)
	waitfor.That(t, 30*time.Second, "the watch to remove the zombie, leaving the live member alone with partitions 0,1", func() bool {
		got := members()
		return len(got) == 1 && got[0] == "0,1"
	})
	if n := s.ExpiredMembers(); n < 1 {
		t.Fatalf("ExpiredMembers %d, want the zombie counted", n)
	}
}

// keptSilent reports whether group, stable, still lists member although
// the session watch has heard nothing from it for longer than its session
// and rebalance timeouts together: a member a broker would have expired.
func keptSilent(t *testing.T, s *Server, group, member string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, s.sessions.cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].State != "Stable" {
		return false
	}
	now := time.Now()
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	for _, m := range resp.Groups[0].Members {
		if ss := s.sessions.members[memberKey{group, m.MemberID}]; m.MemberID == member && ss != nil && ss.expired(now, false) {
			return true
		}
	}
	return false
}

// liveMember starts member A of group g over topic t (two partitions), and
// returns once it owns both, with a function listing each member's
// partitions while the group is stable.
func liveMember(t *testing.T, s *Server) func() []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := s.CreateTopic(ctx, "t", 2); err != nil {
		t.Fatal(err)
	}
	a, err := kgo.NewClient(kgo.SeedBrokers(s.Addrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.Balancers(kgo.StickyBalancer()), kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.RebalanceTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	pctx, stopPoll := context.WithCancel(ctx)
	wg.Go(func() {
		for pctx.Err() == nil {
			a.PollFetches(pctx)
		}
	})
	t.Cleanup(func() { stopPoll(); wg.Wait(); a.Close() })
	admin, err := kgo.NewClient(kgo.SeedBrokers(s.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	members := func() []string {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g"}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].State != "Stable" {
			return nil
		}
		var out []string
		for _, m := range resp.Groups[0].Members {
			var as kmsg.ConsumerMemberAssignment
			_ = as.ReadFrom(m.MemberAssignment)
			var parts []string
			for _, tp := range as.Topics {
				for _, p := range tp.Partitions {
					parts = append(parts, strconv.Itoa(int(p)))
				}
			}
			sort.Strings(parts)
			out = append(out, strings.Join(parts, ","))
		}
		sort.Strings(out)
		return out
	}
	waitfor.That(t, 30*time.Second, "A alone with both partitions", func() bool { got := members(); return len(got) == 1 && got[0] == "0,1" })
	return members
}

// dieWhileJoining joins group g over a raw connection (v5: the first join
// is refused with a member id to use), sends the second join, which waits
// for the live member to rejoin, and, once the broker has taken the join,
// closes the connection: a process SIGKILLed in a rebalance. It returns
// the dead joiner's member id.
func dieWhileJoining(t *testing.T, s *Server) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 5
	join.Group, join.ProtocolType = "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 1000, 2000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "sticky", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("dead-joiner"))
	if _, err := conn.Write(f.AppendRequest(nil, join, 1)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	first := kmsg.NewPtrJoinGroupResponse()
	first.Version = 5
	if err := first.ReadFrom(body[4:]); err != nil { // after the correlation id
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(first.ErrorCode); err != kerr.MemberIDRequired {
		t.Fatalf("first join: %v, want MEMBER_ID_REQUIRED", err)
	}
	join.MemberID = first.MemberID
	if _, err := conn.Write(f.AppendRequest(nil, join, 2)); err != nil {
		t.Fatal(err)
	}
	// The session watch sees each group request as the cluster takes it.
	waitfor.That(t, 15*time.Second, "the dead joiner's second join to reach the group", func() bool {
		s.sessions.mu.Lock()
		defer s.sessions.mu.Unlock()
		_, seen := s.sessions.members[memberKey{"g", first.MemberID}]
		return seen
	})
	return first.MemberID
}

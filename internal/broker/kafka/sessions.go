package kafka

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessions enforces the classic consumer-group session timeout where kfake
// misses it. kfake arms a member's session timer when it answers the
// member's JoinGroup; when that answer cannot be delivered (the member's
// process died while it waited in a rebalance), no timer is armed, and
// once the leader's SyncGroup makes the group stable the dead member keeps
// the partitions it was assigned for good: their records are never
// consumed. A real broker expires such a member after its session timeout.
//
// sessions watches every member's group requests (JoinGroup, SyncGroup,
// Heartbeat, OffsetCommit) and sends a LeaveGroup on behalf of a member
// that has sent none for longer than the session timeout it asked for (in
// a rebalance: that plus its rebalance timeout, the longest a live member
// waits silently in JoinGroup or SyncGroup). A live member heartbeats well
// within it, so only dead members are removed.
type sessions struct {
	mu      sync.Mutex
	members map[memberKey]*session
	cl      *kgo.Client
	removed atomic.Int64
	// paused stops the removals (tests that make a member kfake keeps).
	paused atomic.Bool
	stop   chan struct{}
	done   chan struct{}
}

type memberKey struct{ group, member string }

type session struct {
	last time.Time
	// timeout and rebalance are the session and rebalance timeouts the
	// member asked for in its JoinGroup.
	timeout, rebalance time.Duration
}

// expired reports whether a member silent since s.last has outlived its
// session: in a stable group a live member heartbeats within its session
// timeout; in a rebalance it may wait in JoinGroup or SyncGroup, silent,
// for up to its rebalance timeout more.
func (s *session) expired(now time.Time, stable bool) bool {
	limit := s.timeout
	if !stable {
		limit += s.rebalance
	}
	return now.Sub(s.last) > limit
}

// defaultSession and defaultRebalance stand for a member's timeouts until
// its JoinGroup is seen: Kafka clients' defaults.
const (
	defaultSession   = 45 * time.Second
	defaultRebalance = time.Minute
)

// sweepEvery is how often sessions looks for expired members.
const sweepEvery = 250 * time.Millisecond

// watchSessions starts the watcher on s's cluster.
func watchSessions(s *Server) (*sessions, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addrs()...))
	if err != nil {
		return nil, err
	}
	w := &sessions{members: map[memberKey]*session{}, cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	for _, key := range []int16{kmsg.JoinGroup.Int16(), kmsg.SyncGroup.Int16(), kmsg.Heartbeat.Int16(), kmsg.OffsetCommit.Int16(), kmsg.LeaveGroup.Int16()} {
		s.cluster.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
			w.observe(req)
			return nil, nil, false // the cluster handles it as usual
		})
	}
	go w.loop()
	return w, nil
}

// observe records a member's request.
func (w *sessions) observe(req kmsg.Request) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := func(group, member string) *session {
		if member == "" {
			return nil
		}
		k := memberKey{group, member}
		m := w.members[k]
		if m == nil {
			m = &session{timeout: defaultSession, rebalance: defaultRebalance}
			w.members[k] = m
		}
		m.last = now
		return m
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if m := seen(r.Group, r.MemberID); m != nil {
			m.timeout = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
			m.rebalance = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
		}
	case *kmsg.SyncGroupRequest:
		seen(r.Group, r.MemberID)
	case *kmsg.HeartbeatRequest:
		seen(r.Group, r.MemberID)
	case *kmsg.OffsetCommitRequest:
		seen(r.Group, r.MemberID)
	case *kmsg.LeaveGroupRequest:
		delete(w.members, memberKey{r.Group, r.MemberID})
		for _, m := range r.Members {
			delete(w.members, memberKey{r.Group, m.MemberID})
		}
	}
}

func (w *sessions) loop() {
	defer close(w.done)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.sweep()
		}
	}
}

// sweep removes the members whose session expired, and forgets the
// members no group has any more.
func (w *sessions) sweep() {
	if w.paused.Load() {
		return
	}
	w.mu.Lock()
	groups := map[string]bool{}
	for k := range w.members {
		groups[k.group] = true
	}
	w.mu.Unlock()
	if len(groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	for g := range groups {
		req.Groups = append(req.Groups, g)
	}
	resp, err := req.RequestWith(ctx, w.cl)
	if err != nil {
		return // asked again at the next sweep
	}
	now := time.Now()
	expired := map[string][]string{}
	w.mu.Lock()
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		in := map[string]bool{}
		for _, m := range g.Members {
			in[m.MemberID] = true
			s := w.members[memberKey{g.Group, m.MemberID}]
			if s == nil {
				// Joined before the watch began: its clock starts now.
				w.members[memberKey{g.Group, m.MemberID}] = &session{last: now, timeout: defaultSession, rebalance: defaultRebalance}
				continue
			}
			if s.expired(now, g.State == "Stable") {
				expired[g.Group] = append(expired[g.Group], m.MemberID)
			}
		}
		for k := range w.members {
			if k.group == g.Group && !in[k.member] && now.Sub(w.members[k].last) > w.members[k].timeout {
				delete(w.members, k)
			}
		}
	}
	w.mu.Unlock()
	for group, ids := range expired {
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group = group
		for _, id := range ids {
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = id
			reason := "session expired (removed by the test broker's session watch)"
			m.Reason = &reason
			leave.Members = append(leave.Members, m)
		}
		if _, err := leave.RequestWith(ctx, w.cl); err == nil { // else asked again at the next sweep
			w.removed.Add(int64(len(ids)))
		}
	}
}

// close stops the watcher.
func (w *sessions) close() {
	close(w.stop)
	<-w.done
	w.cl.Close()
}

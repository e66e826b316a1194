package serve

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// maxGroup bounds the events one group commit holds.
const maxGroup = 5000

// publisher commits concurrent ingest requests to the queue together:
// while one transaction commits, the requests that arrive wait, and the
// next transaction takes them all (group commit: one fsync for many
// requests). It takes them once it holds SQLite's one writer, not before
// it waits for it: the requests that arrive while it waits go with it,
// not with the one after. Each request still learns the result of the very
// transaction that holds its events, so a 202 is only sent once they are
// durable, and a request's events are committed all together or not at
// all.
type publisher struct {
	publish func(ctx context.Context, group *pubGroup) error
	reqs    chan *pubReq
	stop    chan struct{}
	done    chan struct{}
	// waiting counts the requests waiting to be taken into a group.
	waiting atomic.Int64
}

// pubReq is one ingest request's events, parsed (Raw is the bytes to
// queue). The publish sets accepted, one per event, before err says the
// transaction's result.
type pubReq struct {
	evs      []seqboxtype.Event
	accepted []store.GatewayAccepted
	err      chan error
}

func newPublisher(publish func(ctx context.Context, group *pubGroup) error) *publisher {
	return &publisher{publish: publish, reqs: make(chan *pubReq), stop: make(chan struct{}), done: make(chan struct{})}
}

// Publish queues the request's new events durably, grouped with
// concurrent requests, and says of each event whether it was new (and is
// queued now) or which copy came first (a duplicate or a collision,
// recorded as the consumer would, and not queued).
func (p *publisher) Publish(ctx context.Context, evs []seqboxtype.Event) ([]store.GatewayAccepted, error) {
	r := &pubReq{evs: evs, err: make(chan error, 1)}
	p.waiting.Add(1)
	select {
	case p.reqs <- r:
		p.waiting.Add(-1)
	case <-p.stop:
		p.waiting.Add(-1)
		return nil, errShuttingDown
	case <-ctx.Done():
		p.waiting.Add(-1)
		return nil, ctx.Err()
	}
	// Once handed over, the commit goes ahead whatever the client does:
	// wait for its result.
	if err := <-r.err; err != nil {
		return nil, err
	}
	return r.accepted, nil
}

// run commits groups until close is called.
func (p *publisher) run() {
	defer close(p.done)
	for {
		var first *pubReq
		select {
		case first = <-p.reqs:
		case <-p.stop:
			return
		}
		g := &pubGroup{reqs: []*pubReq{first}, n: len(first.evs), more: p.reqs}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.publish(ctx, g)
		cancel()
		for _, r := range g.reqs {
			r.err <- err
		}
	}
}

// pubGroup is the requests one transaction commits: the first, and those
// its publish gathers once its transaction began.
type pubGroup struct {
	reqs []*pubReq
	n    int // their events
	more <-chan *pubReq
}

// gather adds the requests waiting now, up to maxGroup events.
func (g *pubGroup) gather() {
	for g.n < maxGroup {
		select {
		case r := <-g.more:
			g.reqs = append(g.reqs, r)
			g.n += len(r.evs)
		default:
			return
		}
	}
}

// close stops the publisher once no request is in flight (after the
// HTTP server's shutdown).
func (p *publisher) close() {
	close(p.stop)
	<-p.done
}

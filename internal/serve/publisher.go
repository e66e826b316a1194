package serve

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// maxGroup bounds the events one group commit holds.
const maxGroup = 5000

// publisher commits concurrent ingest requests to the queue together:
// while one transaction commits, the requests that arrive wait, and the
// next transaction takes them all (group commit: one fsync for many
// requests). Each request still learns the result of the very
// transaction that holds its events, so a 202 is only sent once they are
// durable, and a request's events are committed all together or not at
// all.
type publisher struct {
	publish func(ctx context.Context, group []*pubReq) error
	reqs    chan *pubReq
	stop    chan struct{}
	done    chan struct{}
}

// pubReq is one ingest request's events, parsed (Raw is the bytes to
// queue). The publish sets accepted, one per event, before err says the
// transaction's result.
type pubReq struct {
	evs      []seqboxtype.Event
	accepted []store.GatewayAccepted
	err      chan error
}

func newPublisher(publish func(ctx context.Context, group []*pubReq) error) *publisher {
	return &publisher{publish: publish, reqs: make(chan *pubReq), stop: make(chan struct{}), done: make(chan struct{})}
}

// Publish queues the request's new events durably, grouped with
// concurrent requests, and says of each event whether it was new (and is
// queued now) or which copy came first (a duplicate or a collision,
// recorded as the consumer would, and not queued).
func (p *publisher) Publish(ctx context.Context, evs []seqboxtype.Event) ([]store.GatewayAccepted, error) {
	r := &pubReq{evs: evs, err: make(chan error, 1)}
	select {
	case p.reqs <- r:
	case <-p.stop:
		return nil, errShuttingDown
	case <-ctx.Done():
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
		group := []*pubReq{first}
		n := len(first.evs)
	gather:
		for n < maxGroup {
			select {
			case r := <-p.reqs:
				group = append(group, r)
				n += len(r.evs)
			default:
				break gather
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.publish(ctx, group)
		cancel()
		for _, r := range group {
			r.err <- err
		}
	}
}

// close stops the publisher once no request is in flight (after the
// HTTP server's shutdown).
func (p *publisher) close() {
	close(p.stop)
	<-p.done
}

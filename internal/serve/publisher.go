package serve

import (
	"context"
	"time"
)

// maxGroup bounds the events one group commit holds.
const maxGroup = 5000

// publisher commits concurrent ingest requests to the queue together:
// while one PublishBatch transaction commits, the requests that arrive
// wait, and the next transaction takes them all (group commit: one fsync
// for many requests). Each request still learns the result of the very
// transaction that holds its events, so a 202 is only sent once they are
// durable, and a request's events are committed all together or not at
// all.
type publisher struct {
	publish func(ctx context.Context, bodies [][]byte) error
	reqs    chan *pubReq
	stop    chan struct{}
	done    chan struct{}
}

type pubReq struct {
	raws [][]byte
	err  chan error
}

func newPublisher(publish func(ctx context.Context, bodies [][]byte) error) *publisher {
	return &publisher{publish: publish, reqs: make(chan *pubReq), stop: make(chan struct{}), done: make(chan struct{})}
}

// Publish queues raws durably, grouped with concurrent requests.
func (p *publisher) Publish(ctx context.Context, raws [][]byte) error {
	r := &pubReq{raws: raws, err: make(chan error, 1)}
	select {
	case p.reqs <- r:
	case <-p.stop:
		return errShuttingDown
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once handed over, the commit goes ahead whatever the client does:
	// wait for its result.
	return <-r.err
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
		n := len(first.raws)
	gather:
		for n < maxGroup {
			select {
			case r := <-p.reqs:
				group = append(group, r)
				n += len(r.raws)
			default:
				break gather
			}
		}
		all := make([][]byte, 0, n)
		for _, r := range group {
			all = append(all, r.raws...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.publish(ctx, all)
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

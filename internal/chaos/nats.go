package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natstr "github.com/seqbox/seqbox/transport/nats"
)

// natsBroker is a NATS server or cluster with JetStream: a stream per
// scenario.
type natsBroker struct {
	url, run string
	replicas int
	n        int
}

// dialNATS checks that the server at e.Addr answers and, unless
// e.Replicas says, asks it whether it is in a cluster.
func dialNATS(e Endpoint) (*natsBroker, error) {
	nc, err := nats.Connect(e.Addr, nats.Timeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", e.Addr, err)
	}
	defer nc.Close()
	replicas := e.Replicas
	if replicas == 0 {
		replicas = 1
		if nc.ConnectedClusterName() != "" {
			replicas = min(3, max(1, len(nc.Servers())))
		}
	}
	return &natsBroker{url: e.Addr, run: e.Run, replicas: replicas}, nil
}

func (b *natsBroker) open(ctx context.Context, lease time.Duration) (queue, error) {
	b.n++
	cfg := natsWorkerConfig(b.url, fmt.Sprintf("chaos%s%d", b.run, b.n), lease)
	cfg.Replicas = b.replicas
	pub, err := natstr.NewPublisher(ctx, cfg)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(cfg.URL, nats.MaxReconnects(-1))
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		_ = pub.Close()
		return nil, err
	}
	return &natsQueue{pub: pub, nc: nc, js: js, cfg: cfg}, nil
}

// Close holds nothing: each queue closes its connections.
func (b *natsBroker) Close() error { return nil }

// natsWorkerConfig is the JetStream configuration of a scenario: its own
// stream and subjects, AckWait the lease. The stream's replication is
// the broker's (the parent creates the stream before any worker).
func natsWorkerConfig(url, name string, lease time.Duration) natstr.Config {
	return natstr.Config{URL: url, Stream: strings.ToUpper(name), Subject: name + ".events",
		AckWait: lease, MaxAttempts: 30}
}

type natsQueue struct {
	pub *natstr.Publisher
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg natstr.Config
}

func (q *natsQueue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return publishRuns(ctx, bodies, q.pub.PublishBatch, func(ctx context.Context, body []byte) error {
		_, err := q.js.Publish(ctx, q.cfg.Subject+".0", body)
		return err
	})
}

func (q *natsQueue) Pending(ctx context.Context) (int, error) {
	durable := q.cfg.Durable
	if durable == "" {
		durable = "seqbox"
	}
	c, err := q.js.Consumer(ctx, q.cfg.Stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return -1, nil // no worker has joined yet
	}
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

func (q *natsQueue) Args() []string {
	return []string{"--transport", "nats", "--broker", q.cfg.URL, "--topic", strings.TrimSuffix(q.cfg.Subject, ".events")}
}

func (q *natsQueue) Close() error {
	q.nc.Close()
	return q.pub.Close()
}

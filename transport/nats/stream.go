package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// connect opens a connection that keeps reconnecting (across a cluster's
// members when URL lists several) and a JetStream context on it.
func connect(cfg Config) (*natsgo.Conn, jetstream.JetStream, error) {
	opts := append([]natsgo.Option{
		natsgo.Name("seqbox"),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250 * time.Millisecond),
	}, cfg.Options...)
	nc, err := natsgo.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats transport: connect %s: %w", cfg.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats transport: %w", err)
	}
	return nc, js, nil
}

// filter is the subject the stream and the consumer cover: every
// partition subject.
func filter(cfg Config) string { return cfg.Subject + ".*" }

// ensureStream returns the stream, creating it when missing. An existing
// stream is not changed, only checked to cover the partition subjects.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       cfg.Stream,
			Subjects:   []string{filter(cfg)},
			Retention:  jetstream.LimitsPolicy,
			Storage:    cfg.Storage,
			Replicas:   cfg.Replicas,
			Duplicates: cfg.DuplicateWindow,
			MaxAge:     cfg.MaxAge,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, cfg.Stream) // created meanwhile by another process
		}
	}
	if err != nil {
		return nil, fmt.Errorf("nats transport: stream %s: %w", cfg.Stream, err)
	}
	subjects := s.CachedInfo().Config.Subjects
	if !slices.Contains(subjects, filter(cfg)) && !slices.Contains(subjects, cfg.Subject+".>") && !slices.Contains(subjects, ">") {
		return nil, invalid("Subject", "stream %s covers %q, not %s", cfg.Stream, subjects, filter(cfg))
	}
	return s, nil
}

// consumerConfig is the durable pull consumer every member shares.
func consumerConfig(cfg Config) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "seqbox consumer: acknowledged only after the inbox transaction commits",
		FilterSubject: filter(cfg),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		MaxAckPending: cfg.MaxAckPending,
	}
}

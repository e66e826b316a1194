// Package kafka starts an in-process Kafka broker (franz-go's kfake) on
// loopback, for the Kafka transport's tests and for `seqbox-lab chaos
// --transport kafka`, whose consumer processes reach it over TCP.
//
// kfake speaks the Kafka wire protocol (produce, fetch, consumer groups
// with the classic join/sync protocol, offset commits with metadata), keeps
// its log in memory unless Config.Dir is set, and lets a test intercept any
// request (Cluster().ControlKey) to fail offset commits and the like.
// Server adds what kfake misses and a real broker does: it expires a
// group member that died while waiting in a rebalance (see sessions).
package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seqbox/seqbox/internal/broker/kafkaadmin"
)

// Config configures Start. Zero values take the defaults.
type Config struct {
	// Brokers is how many brokers the cluster runs, each on its own
	// loopback port. Default 1.
	Brokers int
	// Partitions is the partition count of topics created without one
	// (CreateTopic with 0). Default 4.
	Partitions int32
	// Dir, when set, persists the log and the committed offsets there, so
	// a restarted Server on the same Dir keeps them. Default: in memory.
	Dir string
	// MinSessionTimeout is the shortest consumer-group session a member
	// may ask for. Default 100ms, so tests can detect a dead member fast
	// (Kafka's own default is 6s).
	MinSessionTimeout time.Duration
}

// Server is a running in-process Kafka cluster.
type Server struct {
	cluster  *kfake.Cluster
	cfg      Config
	sessions *sessions
}

// Start starts a cluster listening on 127.0.0.1 on ephemeral ports.
func Start(cfg Config) (*Server, error) {
	if cfg.Brokers < 0 {
		return nil, fmt.Errorf("kafka broker: Brokers: %d: must not be negative", cfg.Brokers)
	}
	if cfg.Partitions < 0 {
		return nil, fmt.Errorf("kafka broker: Partitions: %d: must not be negative", cfg.Partitions)
	}
	if cfg.Brokers == 0 {
		cfg.Brokers = 1
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 4
	}
	if cfg.MinSessionTimeout <= 0 {
		cfg.MinSessionTimeout = 100 * time.Millisecond
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(cfg.Brokers),
		kfake.DefaultNumPartitions(int(cfg.Partitions)),
		kfake.GroupMinSessionTimeout(cfg.MinSessionTimeout),
	}
	if cfg.Dir != "" {
		opts = append(opts, kfake.DataDir(cfg.Dir), kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka broker: start: %w", err)
	}
	s := &Server{cluster: c, cfg: cfg}
	if s.sessions, err = watchSessions(s); err != nil {
		c.Close()
		return nil, fmt.Errorf("kafka broker: start: %w", err)
	}
	return s, nil
}

// Addrs returns the brokers' host:port addresses, the seed list a client
// needs.
func (s *Server) Addrs() []string { return s.cluster.ListenAddrs() }

// Cluster returns the underlying kfake cluster, for tests that intercept
// requests (ControlKey) or move partitions.
func (s *Server) Cluster() *kfake.Cluster { return s.cluster }

// CreateTopic creates topic with the given partition count (0: the
// server's default). A topic that already exists is not an error.
func (s *Server) CreateTopic(ctx context.Context, topic string, partitions int32) error {
	if partitions <= 0 {
		partitions = s.cfg.Partitions
	}
	if err := kafkaadmin.CreateTopic(ctx, s.Addrs(), topic, partitions); err != nil {
		return fmt.Errorf("kafka broker: %w", err)
	}
	return nil
}

// ExpiredMembers counts the group members the server removed because
// their session ran out while kfake kept them (see sessions).
func (s *Server) ExpiredMembers() int { return int(s.sessions.removed.Load()) }

// Close stops the cluster; with Dir set, it saves the log first.
func (s *Server) Close() {
	if s.sessions != nil {
		s.sessions.close()
	}
	s.cluster.Close()
}

package kafka

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbox/seqbox/internal/shorttest"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the in-process Kafka broker's suite") {
		return
	}
	goleak.VerifyTestMain(m)
}

// TestStart: the cluster listens on loopback, creates a topic (again
// without error) and refuses a negative config.
func TestStart(t *testing.T) {
	if _, err := Start(Config{Brokers: -1}); err == nil {
		t.Fatal("Start accepted Brokers -1")
	}
	s, err := Start(Config{Brokers: 2})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer s.Close()
	if n := len(s.Addrs()); n != 2 {
		t.Fatalf("%d addresses, want 2", n)
	}
	for _, a := range s.Addrs() {
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", a, err)
		}
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		if err := s.CreateTopic(ctx, "t", 3); err != nil {
			t.Fatalf("create topic: %v", err)
		}
	}
}

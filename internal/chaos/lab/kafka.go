package lab

import (
	"fmt"
	"strings"

	"github.com/seqbox/seqbox/internal/chaos"

	kafkabroker "github.com/seqbox/seqbox/internal/broker/kafka"
)

// kafkaCluster is kfake with the session expiry internal/broker/kafka
// adds.
type kafkaCluster struct {
	stopping
	srv *kafkabroker.Server
}

func startKafka() (chaos.Broker, error) {
	s, err := kafkabroker.Start(kafkabroker.Config{Partitions: 8})
	if err != nil {
		return nil, err
	}
	b, err := dial("kafka", strings.Join(s.Addrs(), ","), 0)
	if err != nil {
		s.Close()
		return nil, err
	}
	return &kafkaCluster{stopping{b, func() error { s.Close(); return nil }}, s}, nil
}

// Report says how many dead group members the server expired.
func (b *kafkaCluster) Report() string {
	return fmt.Sprintf("the broker has expired %d dead group members so far (see internal/broker/kafka)", b.srv.ExpiredMembers())
}

package lab

import (
	"github.com/seqbox/seqbox/internal/chaos"

	pubsubbroker "github.com/seqbox/seqbox/internal/broker/pubsub"
)

// startPubsub starts pstest; the harness counts the scenario's pending
// messages in it (no Pub/Sub API can).
func startPubsub() (chaos.Broker, error) {
	s, err := pubsubbroker.Start(0)
	if err != nil {
		return nil, err
	}
	return stopping{pubsubBroker(s.Addr, fake{s}), s.Close}, nil
}

// fake is pstest, which publishes past any client and counts acks.
type fake struct{ srv *pubsubbroker.Server }

// Publish puts body on topic in the fake, past any client.
func (f fake) Publish(topic string, body []byte) { f.srv.Fake().Publish(topic, body, nil) }

// Unacked counts topic's messages the fake has no ack for.
func (f fake) Unacked(topic string) int {
	n := 0
	for _, m := range f.srv.Fake().Messages() {
		if m.Topic == topic && m.Acks == 0 {
			n++
		}
	}
	return n
}

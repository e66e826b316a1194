package lab

import (
	"github.com/seqbox/seqbox/internal/chaos"

	sqsbroker "github.com/seqbox/seqbox/internal/broker/sqs"
)

func startSQS() (chaos.Broker, error) {
	s, err := sqsbroker.Start(sqsbroker.Options{})
	if err != nil {
		return nil, err
	}
	b, err := dial("sqs", s.Endpoint(), 0)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return stopping{b, s.Close}, nil
}

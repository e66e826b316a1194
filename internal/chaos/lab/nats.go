package lab

import (
	"time"

	"github.com/seqbox/seqbox/internal/chaos"

	natsbroker "github.com/seqbox/seqbox/internal/broker/nats"
)

// natsCluster is a three-node NATS cluster, so a scenario can kill one
// node and JetStream keeps a quorum.
type natsCluster struct {
	stopping
	cluster *natsbroker.Cluster
}

func startNATS() (chaos.Broker, error) {
	c, err := natsbroker.StartCluster(3, "")
	if err == nil {
		err = c.WaitReady(30 * time.Second)
	}
	var b chaos.Broker
	if err == nil {
		// Streams replicated on every node.
		b, err = dial("nats", c.URL(), 3)
	}
	if err != nil {
		if c != nil {
			_ = c.Close()
		}
		return nil, err
	}
	return &natsCluster{stopping{b, c.Close}, c}, nil
}

// KillNode stops the second node for down and starts it again.
func (b *natsCluster) KillNode(down time.Duration, log func(string, ...any)) {
	node := b.cluster.Nodes[1]
	log("stopping NATS node %s for %s", node.Name(), down)
	node.Shutdown()
	time.Sleep(down)
	if err := node.Restart(); err != nil {
		log("restart NATS node %s: %v", node.Name(), err)
	}
}

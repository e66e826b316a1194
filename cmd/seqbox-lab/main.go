// Command seqbox-lab is seqbox with in-process brokers for testing and
// chaos: every seqbox command, and `seqbox-lab chaos --transport T` for T
// in nats, kafka, sqs and pubsub starts T's emulator (an embedded
// nats-server cluster, kfake, goaws, pstest) on loopback when no --broker
// is given. The operator binary, seqbox, links none of them.
package main

import (
	"github.com/seqbox/seqbox/internal/chaos/lab"
	"github.com/seqbox/seqbox/internal/cli"
)

func main() {
	cli.Main(cli.Edition{Name: "seqbox-lab", StartBroker: lab.Start, WorkerTransports: lab.WorkerTransports})
}

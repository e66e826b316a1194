package seqbox

import (
	"sync"
	"sync/atomic"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// Consumer applies events from a transport through the inbox pipeline:
// receive, one transaction per batch, COMMIT, then ACK. A batch runs
// without savepoints; one that must undo a delivery's writes (a failed
// handler, a lost key race) reruns with a savepoint per delivery, and a
// consumer with Decide always does.
type Consumer struct {
	cfg Config
	p   *pipeline
	// kind is the registered handler kind (store.HandlerApplication unless
	// seqbox's own commands mark it record).
	kind string
	// process names this process in the registration and in the operator
	// requests it takes.
	process string
	// claimant names this consumer in the claims of decisions in flight.
	claimant string
	// decider runs Config.Decide for the messages the pipeline stops to
	// be decided.
	decider    *decider
	regMu      sync.Mutex
	registered atomic.Bool
	// txAck is the transport when it acknowledges in the store's own
	// transaction (the embedded queue in the store's file).
	txAck transport.TxAcker
	// hooks: see pipeline.hooks.
	hooks fault.Hook
	// tr starts the receive, settle and decide spans.
	tr tracing
	// sizer bounds batches by the target latency.
	sizer *batchSizer
}

// NewConsumer validates cfg, fills in defaults and returns a consumer.
func NewConsumer(cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	tr := newTracing(c.TracerProvider, c.Name)
	cons := &Consumer{cfg: c, p: &pipeline{cfg: c, tr: tr, serialWriters: oneWriter(c.Store)}, tr: tr, kind: store.HandlerApplication, process: processName()}
	cons.sizer = newBatchSizer(c)
	cons.claimant = cons.process + "/" + randomSuffix()
	cons.decider = newDecider(cons)
	cons.p.claimOwner = cons.decider.owner
	if ta, ok := c.Transport.(transport.TxAcker); ok {
		if st, ok := c.Store.(interface{ Location() string }); ok && ta.Location() != "" && ta.Location() == st.Location() {
			cons.txAck = ta
		}
	}
	return cons, nil
}

// Name is the consumer's name.
func (c *Consumer) Name() string { return c.cfg.Name }

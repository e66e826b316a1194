package seqbox

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
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
	// kind is the registered handler kind: store.HandlerApplication, or
	// store.HandlerRecord when seqbox's own commands mark it so
	// (own.Options.Record, see NewConsumer).
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
	// sightings are the running requests' signs of life as abandonSilent
	// last saw them change, and sightAt when it last looked, by the
	// consumer's clock; under sightMu.
	sightMu   sync.Mutex
	sightings map[int64]sighting
	sightAt   time.Time
	// txAck is the transport when it acknowledges in the store's own
	// transaction (the embedded queue in the store's file).
	txAck transport.TxAcker
	// hooks: see pipeline.hooks (own.Options.Hook, see NewConsumer).
	hooks fault.Hook
	// tr starts the receive, settle and decide spans.
	tr tracing
	// sizer bounds batches by the target latency.
	sizer *batchSizer
	// gate holds Run's receiving while the store does not answer.
	gate storeGate
	// waitAlerts holds, by key, when the sweep last logged that a key
	// past MaxBlock waits for its blocker's open call (once a minute).
	waitAlerts sync.Map
}

// NewConsumer validates cfg, fills in defaults and returns a consumer.
func NewConsumer(cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	// seqbox's own commands, labs and suites set what an application
	// cannot on the store they pass (internal/own): a crash hook at the
	// fault points, the built-in record handler's kind. This is the only
	// way into a Consumer besides its exported API.
	var opt own.Options
	c.Store, opt = own.Unwrap(c.Store)
	tr := newTracing(c.TracerProvider, c.Name)
	cons := &Consumer{cfg: c, p: &pipeline{cfg: c, tr: tr, serialWriters: oneWriter(c.Store), hooks: opt.Hook, retryAtOnce: opt.Record},
		tr: tr, kind: store.HandlerApplication, process: processName(), hooks: opt.Hook}
	if opt.Record {
		cons.kind = store.HandlerRecord
	}
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

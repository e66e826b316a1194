package seqbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
)

// applications records what a handler applied: each identity with the
// payload hash of the copy applied and the decision it read.
type applications struct {
	mu      sync.Mutex
	applied []string
	// failFirst fails the handler's first call for each id listed, once.
	failFirst map[string]bool
}

func (a *applications) handler(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failFirst[ev.ID] {
		delete(a.failFirst, ev.ID)
		return errors.New("the CRM timed out")
	}
	d, _ := seqbox.DecisionFrom(ctx)
	a.applied = append(a.applied, fmt.Sprintf("%s data=%s decision=%s", ev.ID, ev.Data, d))
	return nil
}

func (a *applications) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.applied...)
}

// payloadAgent decides on the payload it is given: its decision names the
// data it saw.
type payloadAgent struct {
	mu    sync.Mutex
	calls []string
	block chan struct{}
	// started is told each call's data once it began.
	started chan string
}

func (a *payloadAgent) decide(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
	a.mu.Lock()
	a.calls = append(a.calls, string(ev.Data))
	block := a.block
	a.mu.Unlock()
	if a.started != nil {
		a.started <- string(ev.Data)
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return fmt.Appendf(nil, "refund decided on %s", ev.Data), nil
}

func (a *payloadAgent) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func refund(id string, amount int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"refund","partitionkey":"order-1","data":{"amount":%d}}`, id, amount)
}

// Class 2 of issue 36: copy 1 of an identity is decided and its handler
// fails transiently; copy 2, the same identity with another payload, must
// not be applied with copy 1's decision. It is a collision, and copy 1
// applies on its redelivery with the decision made for it.
func TestDecisionIsBoundToThePayloadItWasMadeFor(t *testing.T) {
	b := setup(t)
	a := &payloadAgent{}
	apps := &applications{failFirst: map[string]bool{"r1": true}}
	b.cfg.Decide, b.cfg.Handler = a.decide, apps.handler
	c := b.consumer(t)
	ctx := context.Background()

	results, err := c.Deliver(ctx, refund("r1", 10), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:retry"}, outcomes(results), results[0].Reason)

	results, err = c.Deliver(ctx, refund("r1", 1000), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:collision"}, outcomes(results), "copy 2 carries another payload than the decision was made for: %s", results[0].Reason)
	require.Empty(t, apps.list(), "nothing was applied with a decision made for another payload")

	results, err = c.Deliver(ctx, refund("r1", 10), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:applied"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{`r1 data={"amount":10} decision=refund decided on {"amount":10}`}, apps.list())
	require.Equal(t, []string{`{"amount":10}`}, a.seen(), "the model was asked once, about copy 1")

	results, err = c.Deliver(ctx, refund("r1", 1000), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"r1:collision"}, outcomes(results), "after copy 1 applied, copy 2 is still a collision")
}

// Class 2 and 3 of issue 36, raced: copy 2 arrives while copy 1 is being
// decided. It must not wait for copy 1's decision and apply with it: it is
// a collision at once, and the copy applied is the one the model saw.
func TestCopyWithAnotherPayloadRacingTheDecisionIsACollision(t *testing.T) {
	b := setup(t)
	a := &payloadAgent{block: make(chan struct{}), started: make(chan string, 4)}
	apps := &applications{}
	b.cfg.Decide, b.cfg.Handler = a.decide, apps.handler
	c := b.consumer(t)
	ctx := context.Background()

	first := make(chan []seqboxtype.Result, 1)
	go func() {
		results, err := c.Deliver(ctx, refund("r1", 10), 1)
		if err != nil {
			results = []seqboxtype.Result{{ID: "r1", Outcome: "error", Reason: err.Error()}}
		}
		first <- results
	}()
	require.Equal(t, `{"amount":10}`, <-a.started, "copy 1 is being decided")

	second := make(chan []seqboxtype.Result, 1)
	go func() {
		results, err := c.Deliver(ctx, refund("r1", 1000), 1)
		if err != nil {
			results = []seqboxtype.Result{{ID: "r1", Outcome: "error", Reason: err.Error()}}
		}
		second <- results
	}()
	var results []seqboxtype.Result
	select {
	case results = <-second:
	case <-a.started:
		t.Fatal("copy 2 reached the model")
	}
	require.Equal(t, []string{"r1:collision"}, outcomes(results), results[0].Reason)
	close(a.block)
	results = <-first
	require.Equal(t, []string{"r1:applied"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{`r1 data={"amount":10} decision=refund decided on {"amount":10}`}, apps.list())
	require.Equal(t, []string{`{"amount":10}`}, a.seen())
}

// Found by the state-machine test: a copy waiting for its business key
// binds its identity's turn to its payload; a copy of that identity with
// another payload must be a collision on every later path too, here the
// semantic duplicate it would reach once the other identity applied, not
// only where it would be decided.
func TestCopyOfAWaitingIdentityIsACollisionOnEveryPath(t *testing.T) {
	b := setup(t)
	a := newAgent()
	a.fail["a1"] = 1
	b.cfg.Decide = a.decide
	c := b.consumer(t)
	bk := func(id, key string, amount int) []byte {
		return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","partitionkey":%q,"businesskey":"bk1","data":{"amount":%d}}`, id, key, amount)
	}
	require.Equal(t, []string{"a1:retry"}, outcomes(mustDeliver(t, c, bk("a1", "ka", 1), 1)))
	results := mustDeliver(t, c, bk("b1", "kb", 2), 1)
	require.Equal(t, []string{"b1:retry"}, outcomes(results), "b1 waits for a1's business key: %s", results[0].Reason)
	require.Equal(t, []string{"a1:applied"}, outcomes(mustDeliver(t, c, bk("a1", "ka", 1), 2)))
	results = mustDeliver(t, c, bk("b1", "kb", 3), 1)
	require.Equal(t, []string{"b1:collision"}, outcomes(results), "b1's turn is bound to its first copy: %s", results[0].Reason)
	results = mustDeliver(t, c, bk("b1", "kb", 2), 2)
	require.Equal(t, []string{"b1:semantic_duplicate"}, outcomes(results), results[0].Reason)
}

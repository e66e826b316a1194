package pubsub_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	broker "github.com/seqbox/seqbox/internal/broker/pubsub"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// exactlyOnceAnswer answers the first Acknowledge the way Pub/Sub does
// with exactly-once delivery when part of a request fails (pstest has no
// such answer): an error whose ErrorInfo metadata maps the first ack ID
// to PERMANENT_FAILURE_INVALID_ACK_ID (its lease expired) and the second
// to a transient failure. Later calls go to the fake.
type exactlyOnceAnswer struct{ calls atomic.Int64 }

func (r *exactlyOnceAnswer) React(req any) (bool, any, error) {
	ack := req.(*pubsubpb.AcknowledgeRequest)
	if r.calls.Add(1) > 1 || len(ack.AckIds) != 2 {
		return false, nil, nil
	}
	st, err := status.New(codes.InvalidArgument, "Some acknowledgement ids in the request were invalid.").WithDetails(&errdetails.ErrorInfo{
		Reason: "EXACTLY_ONCE_ACKID_FAILURE", Domain: "pubsub.googleapis.com",
		Metadata: map[string]string{ack.AckIds[0]: "PERMANENT_FAILURE_INVALID_ACK_ID", ack.AckIds[1]: "TRANSIENT_FAILURE_UNORDERED_ACK_ID"},
	})
	if err != nil {
		panic(err)
	}
	return true, nil, st.Err()
}

// TestAckBatchReportsLeaseLost: an ack ID Pub/Sub reports expired is
// counted in an error matching transport.ErrLeaseLost and left unsettled;
// one that failed transiently is retried and settled.
func TestAckBatchReportsLeaseLost(t *testing.T) {
	answer := &exactlyOnceAnswer{}
	srv, err := broker.Start(0, pstest.ServerReactorOption{FuncName: "Acknowledge", Reactor: answer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cfg := fresh(t, srv, nil)
	p := publisher(t, cfg)
	if err := p.PublishBatch(context.Background(), [][]byte{transporttest.Event("a", 1), transporttest.Event("b", 1)}); err != nil {
		t.Fatal(err)
	}
	tr := open(t, cfg)
	ds := []transport.Delivery{receiveOne(t, tr), receiveOne(t, tr)}
	err = tr.AckBatch(context.Background(), ds)
	if !errors.Is(err, transport.ErrLeaseLost) {
		t.Fatalf("ack batch: %v, want transport.ErrLeaseLost", err)
	}
	if n := answer.calls.Load(); n != 2 {
		t.Fatalf("%d Acknowledge calls, want 2 (the transient failure retried once)", n)
	}
	acks := map[string]int{}
	for _, m := range srv.Fake().Messages() {
		acks[string(m.Data)] = m.Acks
	}
	lost, retried := acks[string(ds[0].Body())], acks[string(ds[1].Body())]
	if lost != 0 || retried != 1 {
		t.Fatalf("acks: lost delivery %d, retried delivery %d; want 0 and 1", lost, retried)
	}
}

package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seqbox/seqbox/seqboxtype"
	natstr "github.com/seqbox/seqbox/transport/nats"
)

// TestRetriedPublishStoredOnce: a producer retry, the same event published
// again within the duplicate window, is acknowledged by the stream as a
// duplicate and stored once, through Publish and through a raw JetStream
// publication of the same message alike.
func TestRetriedPublishStoredOnce(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 2*time.Second)
	pub := publisherT(t, cfg)
	ctx := context.Background()
	body := event("acct-1", 1)
	for range 3 {
		if err := pub.Publish(ctx, body); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	js := inspect(t, s.URL())
	msg, err := pub.Message(body)
	if err != nil {
		t.Fatalf("message: %v", err)
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatalf("raw publish: %v", err)
	}
	if !ack.Duplicate {
		t.Fatalf("a retried publication was not recognised as a duplicate: %+v", ack)
	}
	if err := pub.PublishBatch(ctx, [][]byte{body, event("acct-1", 2)}); err != nil {
		t.Fatalf("publish batch: %v", err)
	}
	if n := streamMsgs(t, js, cfg.Stream); n != 2 {
		t.Fatalf("stream holds %d messages after 5 publications of one event and 1 of another, want 2", n)
	}
}

// TestPublishSubjectAndHeaders: the stored message is the body byte for
// byte, on the subject of its key's partition (of its id when it has no
// key), with the identity as Nats-Msg-Id and the CloudEvent headers.
func TestPublishSubjectAndHeaders(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 2*time.Second)
	cfg.Partitions = 7
	pub := publisherT(t, cfg)
	ctx := context.Background()
	keyed := event("PED-4821", 3)
	unkeyed := []byte(`{"specversion":"1.0","id":"line break%é","source":"erp","type":"order.noted"}`)
	for _, b := range [][]byte{keyed, unkeyed} {
		if err := pub.Publish(ctx, b); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	st, err := inspect(t, s.URL()).Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	checks := []struct {
		seq     uint64
		body    []byte
		subject string
		headers map[string]string
	}{
		{1, keyed, cfg.Subject + "." + strconv.Itoa(fnv1a("PED-4821")%7), map[string]string{
			natstr.HeaderMsgID: natstr.MsgID("nats-test", "PED-4821-v3", hashOf(t, keyed)), natstr.HeaderID: "PED-4821-v3", natstr.HeaderSource: "nats-test",
			natstr.HeaderType: "test.event", natstr.HeaderPartitionKey: "PED-4821", natstr.HeaderObjectVersion: "3"}},
		{2, unkeyed, cfg.Subject + "." + strconv.Itoa(fnv1a("line break%é")%7), map[string]string{
			natstr.HeaderMsgID: natstr.MsgID("erp", "line break%é", hashOf(t, unkeyed)), natstr.HeaderID: "line break%25é", natstr.HeaderSource: "erp",
			natstr.HeaderType: "order.noted", natstr.HeaderPartitionKey: "", natstr.HeaderObjectVersion: ""}},
	}
	for _, c := range checks {
		m, err := st.GetMsg(ctx, c.seq)
		if err != nil {
			t.Fatalf("get message %d: %v", c.seq, err)
		}
		if string(m.Data) != string(c.body) {
			t.Errorf("message %d body %q, want %q", c.seq, m.Data, c.body)
		}
		if m.Subject != c.subject {
			t.Errorf("message %d on %s, want %s", c.seq, m.Subject, c.subject)
		}
		for h, want := range c.headers {
			if got := m.Header.Get(h); got != want {
				t.Errorf("message %d header %s = %q, want %q", c.seq, h, got, want)
			}
		}
	}
}

// TestPublishRefusesInvalidEvent: an invalid event is refused with
// seqboxtype.ParseEvent's error, and a batch holding one publishes nothing.
func TestPublishRefusesInvalidEvent(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 2*time.Second)
	pub := publisherT(t, cfg)
	ctx := context.Background()
	bad := []byte(`{"specversion":"1.0","source":"erp","type":"order.noted"}`)
	err := pub.Publish(ctx, bad)
	var inv *seqboxtype.InvalidEventError
	if !errors.Is(err, seqboxtype.ErrInvalidEvent) || !errors.As(err, &inv) {
		t.Fatalf("publish of an event without id: %v, want seqboxtype.ErrInvalidEvent", err)
	}
	if err := pub.PublishBatch(ctx, [][]byte{event("k", 1), bad, event("k", 2)}); !errors.Is(err, seqboxtype.ErrInvalidEvent) {
		t.Fatalf("publish batch with an invalid event: %v, want seqboxtype.ErrInvalidEvent", err)
	}
	if n := streamMsgs(t, inspect(t, s.URL()), cfg.Stream); n != 0 {
		t.Fatalf("stream holds %d messages after refused publications", n)
	}
}

// TestPartitionIsFNV1a: Partition is FNV-1a (32 bit) modulo n, computed
// here independently, and spreads keys over every partition.
func TestPartitionIsFNV1a(t *testing.T) {
	used := map[int]bool{}
	for i := range 1000 {
		key := fmt.Sprintf("order-%d", i)
		for _, n := range []int{1, 7, 16} {
			if got, want := natstr.Partition(key, n), fnv1a(key)%n; got != want {
				t.Fatalf("Partition(%q, %d) = %d, want %d", key, n, got, want)
			}
		}
		used[natstr.Partition(key, 16)] = true
	}
	if len(used) != 16 {
		t.Fatalf("1000 keys used %d of 16 partitions", len(used))
	}
	if got := natstr.Subject("a.b", "order-1", 16); got != "a.b."+strconv.Itoa(fnv1a("order-1")%16) {
		t.Fatalf("Subject = %s", got)
	}
}

// fnv1a is the 32-bit FNV-1a hash, as published.
func fnv1a(s string) int {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return int(h)
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

// TestPublishBatchKeepsOrder: a batch larger than one window of
// asynchronous publications is stored whole, in the order given.
func TestPublishBatchKeepsOrder(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 2*time.Second)
	var bodies [][]byte
	for v := int64(1); v <= 60; v++ {
		for k := range 10 {
			bodies = append(bodies, event(fmt.Sprintf("key-%d", k), v))
		}
	}
	ctx := context.Background()
	if err := publisherT(t, cfg).PublishBatch(ctx, bodies); err != nil {
		t.Fatalf("publish batch: %v", err)
	}
	st, err := inspect(t, s.URL()).Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	for i, want := range bodies {
		m, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatalf("get message %d of %d: %v", i+1, len(bodies), err)
		}
		if string(m.Data) != string(want) {
			t.Fatalf("stream message %d is %s, want %s", i+1, m.Data, want)
		}
	}
}

// hashOf is the payload hash seqbox computes for an event.
func hashOf(t *testing.T, body []byte) string {
	t.Helper()
	ev, err := seqboxtype.ParseEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	return ev.Hash
}

// The same id with a different payload is a collision, not a retry: the
// stream stores both, so the consumer's inbox can record the collision.
func TestCollisionIsNotDroppedAsARetry(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 2*time.Second)
	pub, err := natstr.NewPublisher(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	first := []byte(`{"specversion":"1.0","id":"evt-1","source":"erp","type":"t","partitionkey":"k","objectversion":1,"data":{"a":1}}`)
	retry := []byte(`{"specversion":"1.0","id":"evt-1","source":"erp","type":"t","partitionkey":"k","objectversion":1,"data":{ "a": 1 }}`)
	other := []byte(`{"specversion":"1.0","id":"evt-1","source":"erp","type":"t","partitionkey":"k","objectversion":1,"data":{"a":2}}`)
	if err := pub.PublishBatch(context.Background(), [][]byte{first, retry, other, first}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	info, err := inspect(t, s.URL()).Stream(context.Background(), cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	si, err := info.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2: the event once (its retries dropped) and the collision", si.State.Msgs)
	}
}

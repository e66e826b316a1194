package pubsub_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport/pubsub"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestPublisherMessage: the body is published unchanged, the partitionkey
// is the ordering key, and the identity travels in attributes; an event
// without a partitionkey has no ordering key.
func TestPublisherMessage(t *testing.T) {
	srv := startBroker(t)
	cfg := fresh(t, srv, nil)
	p := publisher(t, cfg)
	keyed := transporttest.Event("PED-4821", 7)
	unkeyed := []byte(`{"specversion":"1.0","id":"evt-1","source":"erp","type":"order.created","data":{"total":25.0}}`)
	if err := p.PublishBatch(context.Background(), [][]byte{keyed, unkeyed}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	ms := srv.Fake().Messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages on the server, want 2", len(ms))
	}
	byID := map[string]int{}
	for i, m := range ms {
		byID[m.Attributes[pubsub.AttrID]] = i
	}
	k, u := ms[byID["PED-4821-v7"]], ms[byID["evt-1"]]
	if string(k.Data) != string(keyed) || string(u.Data) != string(unkeyed) {
		t.Fatalf("bodies changed:\n%s\n%s", k.Data, u.Data)
	}
	if k.OrderingKey != "PED-4821" || u.OrderingKey != "" {
		t.Fatalf("ordering keys %q and %q, want PED-4821 and none", k.OrderingKey, u.OrderingKey)
	}
	want := map[string]string{
		pubsub.AttrID: "PED-4821-v7", pubsub.AttrSource: "transporttest", pubsub.AttrType: "test.event",
		pubsub.AttrSpecVersion: "1.0", pubsub.AttrPartitionKey: "PED-4821", pubsub.AttrObjectVersion: "7",
	}
	for name, v := range want {
		if k.Attributes[name] != v {
			t.Fatalf("attribute %s = %q, want %q (all: %v)", name, k.Attributes[name], v, k.Attributes)
		}
	}
	if _, ok := u.Attributes[pubsub.AttrPartitionKey]; ok {
		t.Fatalf("unkeyed event got a partition key attribute: %v", u.Attributes)
	}
	if _, ok := u.Attributes[pubsub.AttrObjectVersion]; ok {
		t.Fatalf("unversioned event got a version attribute: %v", u.Attributes)
	}
}

// TestPublisherRefusesInvalidEvent: an invalid event fails with
// ParseEvent's error naming the field, and nothing of its batch is
// published.
func TestPublisherRefusesInvalidEvent(t *testing.T) {
	srv := startBroker(t)
	p := publisher(t, fresh(t, srv, nil))
	bad := []byte(`{"specversion":"1.0","id":"x","source":"erp","type":"t","objectversion":"v3"}`)
	err := p.PublishBatch(context.Background(), [][]byte{transporttest.Event("k", 1), bad})
	var ie *seqboxtype.InvalidEventError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "objectversion") {
		t.Fatalf("publish of an invalid event: %v, want ParseEvent's error naming objectversion", err)
	}
	if err := p.Publish(context.Background(), []byte(`not json`)); err == nil {
		t.Fatal("published a body that is not JSON")
	}
	if n := len(srv.Fake().Messages()); n != 0 {
		t.Fatalf("%d messages published from refused batches", n)
	}
}

// TestPublisherResumesKeyAfterError: a failed publish pauses its ordering
// key in the client; Publish returns the error and resumes the key, so
// the caller's retry goes through.
func TestPublisherResumesKeyAfterError(t *testing.T) {
	srv := startBroker(t)
	cfg := fresh(t, srv, nil)
	cfg.Topic = "not-created-yet"
	p := publisher(t, cfg)
	ctx := context.Background()
	if err := p.Publish(ctx, transporttest.Event("acct-1", 1)); err == nil {
		t.Fatal("publish to a missing topic succeeded")
	}
	cfg.Subscription = cfg.Topic + "-sub"
	if err := pubsub.Setup(ctx, cfg); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if err := p.Publish(ctx, transporttest.Event("acct-1", 1)); err != nil {
		t.Fatalf("publish again on the key that failed: %v (was it resumed?)", err)
	}
	if n := len(srv.Fake().Messages()); n != 1 {
		t.Fatalf("%d messages on the server, want 1", n)
	}
}

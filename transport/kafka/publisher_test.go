package kafka_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport/kafka"
)

// TestPublisherRecords: the record key is the partition key (the id when
// there is none), every event of a key lands on one partition, the value
// is the event unchanged, and the headers copy its identity, type, key and
// version.
func TestPublisherRecords(t *testing.T) {
	r := newRig(t, 8)
	pub := r.publisher(t)
	unkeyed := []byte(`{"specversion":"1.0","id":"evt-9","source":"crm","type":"note.added"}`)
	var bodies [][]byte
	for v := int64(1); v <= 5; v++ {
		bodies = append(bodies, event("opp-2481", v))
	}
	if err := pub.PublishBatch(context.Background(), append(bodies, unkeyed)); err != nil {
		t.Fatalf("publish batch: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.srv.Addrs()...), kgo.ConsumeTopics(r.topic))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(recs) < 6 && ctx.Err() == nil {
		recs = append(recs, cl.PollFetches(ctx).Records()...)
	}
	if len(recs) != 6 {
		t.Fatalf("read %d records, want 6", len(recs))
	}
	parts := map[int32]bool{}
	var order []string
	for _, rec := range recs {
		ev, err := seqboxtype.ParseEvent(rec.Value)
		if err != nil {
			t.Fatalf("record value is not the event: %v", err)
		}
		h := map[string]string{}
		for _, kv := range rec.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if h[kafka.HeaderID] != ev.ID || h[kafka.HeaderSource] != ev.Source || h[kafka.HeaderType] != ev.Type {
			t.Fatalf("identity headers %v for %s/%s", h, ev.Source, ev.ID)
		}
		if ev.ID == "evt-9" {
			if string(rec.Key) != "evt-9" || h[kafka.HeaderPartitionKey] != "" || h[kafka.HeaderObjectVersion] != "" {
				t.Fatalf("unkeyed event: key %q headers %v", rec.Key, h)
			}
			if string(rec.Value) != string(unkeyed) {
				t.Fatalf("value %s, published %s", rec.Value, unkeyed)
			}
			continue
		}
		v, _ := ev.Version()
		if string(rec.Key) != "opp-2481" || h[kafka.HeaderPartitionKey] != "opp-2481" || h[kafka.HeaderObjectVersion] != strconv.FormatInt(v, 10) {
			t.Fatalf("keyed event %s: key %q headers %v", ev.ID, rec.Key, h)
		}
		if string(rec.Value) != string(event("opp-2481", v)) {
			t.Fatalf("value %s, published %s", rec.Value, event("opp-2481", v))
		}
		parts[rec.Partition] = true
		order = append(order, ev.ID)
	}
	if len(parts) != 1 {
		t.Fatalf("one key's events landed on partitions %v", parts)
	}
	for i, id := range order {
		if want := "opp-2481-v" + strconv.Itoa(i+1); id != want {
			t.Fatalf("partition order %v, want v1..v5", order)
		}
	}
}

// TestPublisherRefusesInvalid: an invalid event is refused with
// seqboxtype.ParseEvent's error and nothing of its batch is produced.
func TestPublisherRefusesInvalid(t *testing.T) {
	r := newRig(t, 1)
	pub := r.publisher(t)
	bad := []byte(`{"specversion":"1.0","id":"x","source":"crm","type":"t","objectversion":"v3"}`)
	_, want := seqboxtype.ParseEvent(bad)
	err := pub.PublishBatch(context.Background(), [][]byte{event("k", 1), bad})
	if err == nil || err.Error() != want.Error() || !errors.Is(err, seqboxtype.ErrInvalidEvent) {
		t.Fatalf("publish invalid: %v, want %v", err, want)
	}
	m := r.open(t, "nothing")
	quietFor(t, m, time.Second)
}

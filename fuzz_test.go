package seqbox_test

import (
	"errors"
	"testing"

	"github.com/seqbox/seqbox"
)

// FuzzParseEvent checks ParseEvent's invariants on arbitrary input: it never
// panics; an accepted envelope is stable (parsing its Raw bytes again gives
// the same identity and hash) and complete (id, source and type are set);
// a refused one is always an ErrInvalidEvent. Run it for longer with
// `go test -run '^$' -fuzz FuzzParseEvent -fuzztime 1m`.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		`{"specversion":"1.0","id":"evt-1","source":"crm","type":"order.placed","data":{"qty":10}}`,
		`{"id":"evt-2","source":"crm","type":"order.cancelled","partitionkey":"PED-4821","objectversion":7,"businesskey":"cancel:PED-4821"}`,
		`{"id":"evt-3","source":"crm","type":"t","partitionkey":"k","objectversion":"41","publishedat":"2026-10-09T12:00:00Z"}`,
		`{"id":"evt-4","source":"crm","type":"t","time":"2026-10-09T12:00:00.123456789+02:00","traceparent":"00-ab-cd-01"}`,
		`{"id":"evt-5","source":"crm","type":"t","data":null,"tenantid":"acme","causationid":"evt-4","dataschema":"v1"}`,
		`{"id":"evt-6","source":"crm","type":"t","data":{"fail":"transient","nested":{"b":[1,2.5,"x"],"a":true}}}`,
		`{ "type" : "t" , "source" : "s" , "id" : "spaced" }`,
		`{"id":"evt-7","source":"crm","type":"t","data":"<html>&amp;\u2028"}`,
		`{"source":"s","type":"t"}`,
		`{"id":"","source":"s","type":"t"}`,
		`{"id":"a","type":"t"}`,
		`{"id":"a","source":"s"}`,
		`{"id":"a","source":"s","type":"t","objectversion":3}`,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":-1}`,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1.5}`,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"x"}`,
		`{"id":"a","source":"s","type":"t","specversion":"0.3"}`,
		`{"id":"a","source":"s","type":"t","time":"soon"}`,
		`{"id":"a","source":`,
		`{"id":"a","source":"s","type":"t"}{}`,
		`[]`,
		`null`,
		`"string"`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := seqbox.ParseEvent(raw)
		if err != nil {
			if !errors.Is(err, seqbox.ErrInvalidEvent) {
				t.Fatalf("error %v (%T) does not match ErrInvalidEvent", err, err)
			}
			return
		}
		if ev.ID == "" || ev.Source == "" || ev.Type == "" {
			t.Fatalf("accepted an envelope without identity or type: %+v", ev)
		}
		if len(ev.Hash) != 64 {
			t.Fatalf("hash %q is not a hex SHA-256", ev.Hash)
		}
		if string(ev.Raw) != string(raw) {
			t.Fatalf("Raw %q differs from the input %q", ev.Raw, raw)
		}
		if ev.ObjectVersion != nil && (*ev.ObjectVersion < 0 || ev.PartitionKey == "") {
			t.Fatalf("accepted objectversion %d with partitionkey %q", *ev.ObjectVersion, ev.PartitionKey)
		}
		again, err := seqbox.ParseEvent(ev.Raw)
		if err != nil {
			t.Fatalf("re-parsing an accepted envelope failed: %v", err)
		}
		if again.Hash != ev.Hash || again.ID != ev.ID || again.Source != ev.Source {
			t.Fatalf("re-parse differs: hash %s/%s id %q/%q source %q/%q",
				ev.Hash, again.Hash, ev.ID, again.ID, ev.Source, again.Source)
		}
	})
}

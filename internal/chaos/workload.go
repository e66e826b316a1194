// Package chaos is the crash-consistency harness behind `seqbox chaos`: it
// generates a workload with every kind of trouble an at-least-once queue
// brings, runs the consumer as separate OS processes that it kills with
// SIGKILL at random moments and at named fault points, and then checks the
// database against an oracle computed from the workload, and every key's
// history of applies against the sequential specification of a key
// (CheckHistory).
package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Kind says what a published message is for, and so what must become of
// it.
type Kind string

// The kinds of message in a workload.
const (
	Original  Kind = "original"  // must apply exactly once, in version order
	Poison    Kind = "poison"    // fails permanently until fixed, then redriven
	Flaky     Kind = "flaky"     // fails transiently at random, then applies
	Copy      Kind = "duplicate" // same identity and payload: duplicate
	Republish Kind = "republish" // same fact with a new publishedat: duplicate
	Collision Kind = "collision" // same identity, different payload
	Semantic  Kind = "semantic"  // new identity, same businesskey
	Late      Kind = "late"      // new identity, old version: stale
	Malformed Kind = "malformed" // invalid envelope: rejected
)

// Message is one publication.
type Message struct {
	Kind    Kind
	Source  string
	ID      string
	Key     string
	Version int64
	// Of is the identity this message duplicates, collides with or
	// semantically repeats ("" for originals).
	Of   string
	Body []byte
}

// Workload is what the harness publishes, in two phases: phase 1 is the
// stream with its trouble; phase 2, after poisons are fixed and redriven,
// is the late versions that must be refused as stale.
type Workload struct {
	Phase1, Phase2 []Message
	// Final is each key's last version.
	Final map[string]int64
	// Pairs maps an identity to the identity it competes with: a semantic
	// duplicate and its original; exactly one of each pair applies.
	Pairs map[string]string
}

// Generate builds a reproducible workload of about n logical messages over
// k keys.
func Generate(seed uint64, n, k int) Workload {
	r := rand.New(rand.NewPCG(seed, seed^0x5eb0c5))
	w := Workload{Final: map[string]int64{}, Pairs: map[string]string{}}
	keyed := n * 9 / 10
	perKey := make([][]Message, k)
	for i := range keyed {
		key := fmt.Sprintf("key-%04d", i%k)
		w.Final[key]++
		v := w.Final[key]
		m := Message{Kind: Original, Source: "chaos", ID: fmt.Sprintf("%s-v%d", key, v), Key: key, Version: v}
		data := map[string]any{"n": v}
		switch x := r.Float64(); {
		case x < 0.005:
			m.Kind, data["fail"] = Poison, "poison"
		case x < 0.035:
			m.Kind, data["fail"] = Flaky, "flaky"
		}
		m.Body = envelope(m, data, "")
		perKey[i%k] = append(perKey[i%k], m)
	}
	// Reorder within each key: a version may swap with one up to two
	// places later, so gaps open and are held until they close.
	for _, ms := range perKey {
		for i := range ms {
			if j := i + r.IntN(3); j < len(ms) && r.Float64() < 0.3 {
				ms[i], ms[j] = ms[j], ms[i]
			}
		}
	}
	// Interleave the keys, keeping each key's (reordered) sequence.
	var stream []Message
	idx := make([]int, k)
	remaining := keyed
	for remaining > 0 {
		i := r.IntN(k)
		for idx[i] >= len(perKey[i]) {
			i = (i + 1) % k
		}
		stream = append(stream, perKey[i][idx[i]])
		idx[i]++
		remaining--
	}
	for i := range n - keyed {
		m := Message{Kind: Original, Source: "chaos", ID: fmt.Sprintf("free-%d", i)}
		m.Body = envelope(m, map[string]any{"n": i}, fmt.Sprintf("effect:%d", i))
		stream = insertAt(stream, r.IntN(len(stream)+1), m)
		if r.Float64() < 0.05 {
			s := Message{Kind: Semantic, Source: "chaos", ID: m.ID + "-again", Of: m.ID}
			s.Body = envelope(s, map[string]any{"n": i}, fmt.Sprintf("effect:%d", i))
			w.Pairs[s.ID], w.Pairs[m.ID] = m.ID, s.ID
			stream = insertAt(stream, r.IntN(len(stream)+1), s)
		}
	}
	// Trouble copies go anywhere after nothing in particular: a copy may
	// even arrive before its original, as producers' retries do.
	var extra []Message
	for _, m := range stream {
		if m.Kind == Semantic {
			continue
		}
		switch x := r.Float64(); {
		case x < 0.04:
			extra = append(extra, Message{Kind: Copy, Source: m.Source, ID: m.ID, Key: m.Key, Version: m.Version, Of: m.ID, Body: m.Body})
		case x < 0.06:
			extra = append(extra, Message{Kind: Republish, Source: m.Source, ID: m.ID, Key: m.Key, Version: m.Version, Of: m.ID,
				Body: withPublishedAt(m.Body)})
		case x < 0.07 && m.Kind == Original:
			c := Message{Kind: Collision, Source: m.Source, ID: m.ID, Key: m.Key, Version: m.Version, Of: m.ID}
			c.Body = envelope(c, map[string]any{"n": m.Version, "mutated": true}, businessKeyOf(m))
			extra = append(extra, c)
		}
	}
	for i := range max(1, n/500) {
		extra = append(extra, Message{Kind: Malformed, Body: fmt.Appendf(nil, `{"id":"bad-%d","source":"chaos","objectversion":"x"}`, i)})
	}
	for _, m := range extra {
		stream = insertAt(stream, r.IntN(len(stream)+1), m)
	}
	w.Phase1 = stream
	for key, final := range w.Final {
		if final >= 2 && r.Float64() < 0.05 {
			m := Message{Kind: Late, Source: "chaos", ID: key + "-late", Key: key, Version: 1 + r.Int64N(final-1)}
			m.Body = envelope(m, map[string]any{"n": m.Version, "late": true}, "")
			w.Phase2 = append(w.Phase2, m)
		}
	}
	return w
}

func insertAt(s []Message, i int, m Message) []Message {
	s = append(s, Message{})
	copy(s[i+1:], s[i:])
	s[i] = m
	return s
}

func envelope(m Message, data map[string]any, businessKey string) []byte {
	ev := map[string]any{"specversion": "1.0", "id": m.ID, "source": m.Source, "type": "chaos." + string(m.Kind), "data": data}
	if m.Key != "" {
		ev["partitionkey"] = m.Key
		ev["objectversion"] = m.Version
	}
	if businessKey != "" {
		ev["businesskey"] = businessKey
	}
	b, _ := json.Marshal(ev)
	return b
}

func businessKeyOf(m Message) string {
	var ev struct {
		BusinessKey string `json:"businesskey"`
	}
	_ = json.Unmarshal(m.Body, &ev)
	return ev.BusinessKey
}

func withPublishedAt(body []byte) []byte {
	var ev map[string]any
	_ = json.Unmarshal(body, &ev)
	ev["publishedat"] = "2026-11-30T12:00:00Z"
	b, _ := json.Marshal(ev)
	return b
}

// Counts summarises a workload.
func (w Workload) Counts() map[Kind]int {
	c := map[Kind]int{}
	for _, m := range append(append([]Message(nil), w.Phase1...), w.Phase2...) {
		c[m.Kind]++
	}
	return c
}

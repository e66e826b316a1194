package model

import (
	"bytes"
	"hash/maphash"
)

// Canonical form. Workers are interchangeable: two states that differ
// only by which worker does what are one state (symmetry reduction), so
// a state is encoded under every permutation of its workers and the
// least encoding stands for all of them. The checker keeps 64-bit hashes
// of canonical encodings, as TLC keeps fingerprints: the chance that two
// of a few million states share one is below one in a million.

// permutations of the first n workers.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for at := 0; at <= len(p); at++ {
			q := append(append(append([]int{}, p[:at]...), n-1), p[at:]...)
			out = append(out, q)
		}
	}
	return out
}

// encoder turns states into canonical bytes and their hashes.
type encoder struct {
	m     *Model
	perms [][]int
	invs  [][]int
	buf   [2][]byte
	seed  maphash.Seed
}

func newEncoder(m *Model) *encoder {
	e := &encoder{m: m, perms: permutations(m.workers), seed: maphash.MakeSeed()}
	for _, p := range e.perms {
		inv := make([]int, len(p))
		for w, to := range p {
			inv[to] = w
		}
		e.invs = append(e.invs, inv)
	}
	return e
}

// canonical returns the least encoding of s over worker permutations.
func (e *encoder) canonical(s *State) []byte {
	best := e.encode(s, 0, e.buf[0][:0])
	e.buf[0] = best
	for n := 1; n < len(e.perms); n++ {
		b := e.encode(s, n, e.buf[1][:0])
		if bytes.Compare(b, best) < 0 {
			e.buf[0], e.buf[1] = b, best
			best = b
		} else {
			e.buf[1] = b
		}
	}
	return best
}

// hash is the canonical encoding's 64-bit hash.
func (e *encoder) hash(s *State) uint64 { return maphash.Bytes(e.seed, e.canonical(s)) }

// encode writes s with worker w renamed e.perms[n][w].
func (e *encoder) encode(s *State, n int, b []byte) []byte {
	m, p, inv := e.m, e.perms[n], e.invs[n]
	for c := range m.copies {
		cs := s.Copy[c]
		if cs >= leased {
			cs = leasedTo(p[cs-leased])
		}
		b = append(b, byte(cs))
	}
	for i := range m.ids {
		id := s.ID[i]
		if id.Claim >= claimLive {
			id.Claim = claimLive + claimState(p[id.Claim-claimLive])
		}
		if id.Ledger == pending && id.Owner >= 0 {
			id.Owner = int8(p[id.Owner])
		} else {
			id.Owner = -1 // only a pending row's owner matters
		}
		if !id.Turn {
			id.TurnMsg = -1 // only a held turn's binding matters
		}
		if !id.Decided {
			id.DecFor = -1
		}
		b = append(b, byte(id.Status), bit(id.Turn), id.TurnSeq, id.Attempts, byte(id.Hash), id.ParkSeq, bit(id.Decided),
			byte(id.Claim), byte(id.Ledger), byte(id.Owner), id.InFlight, id.Remote, id.Effects, id.Asks, id.Credit,
			bit(id.Passed)|bit(id.Overtaken)<<1|bit(id.Released)<<2, byte(id.TurnMsg), byte(id.DecFor), byte(id.Sent))
	}
	for k := range m.keys {
		key := s.Key[k]
		b = append(b, byte(key.Ver), byte(key.Blocked), byte(key.Gaps), byte(key.Gaps>>8), byte(key.LastApplied))
	}
	for to := range m.workers {
		wk := s.Worker[inv[to]]
		if wk.Phase == idle {
			wk = worker{}
		}
		b = append(b, byte(wk.Phase), byte(wk.Copy), byte(wk.Msg), byte(wk.Answer), wk.Seq)
	}
	for i := range m.msgs {
		b = append(b, bit(s.Collided[i]))
	}
	return append(b, s.Crashes, s.Expiries, s.Failures, s.Ops, s.Losses, bit(s.Late), s.Violation.Code, byte(s.Violation.A), byte(s.Violation.B))
}

func bit(b bool) byte {
	if b {
		return 1
	}
	return 0
}

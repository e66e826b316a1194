package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// parked is a parked message of the test's consumer; n varies the values.
// Seq is left for the store to assign.
func (e *txEnv) parked(key, source, id string, version *int64, reason seqboxtype.Park, n int) store.Parked {
	return store.Parked{
		Consumer: e.consumer, Source: source, ID: id, PartitionKey: key, ObjectVersion: version,
		Reason: reason, Detail: fmt.Sprintf("detail %d", n),
		// Bytes that are not text: the envelope is kept byte for byte.
		Envelope:    []byte{'{', 0x00, byte(n), 0xff, 0xfe, '}'},
		PayloadHash: fmt.Sprintf("sha256:%064x", n),
		ParkedAt:    at(n),
	}
}

// park parks p.
func (e *txEnv) park(p store.Parked) {
	e.t.Helper()
	require.NoError(e.t, e.tx.ParkedInsert(e.ctx, p))
}

// parkedForKey lists a key's held and blocked messages.
func (e *txEnv) parkedForKey(key string) []store.Parked {
	e.t.Helper()
	ps, err := e.tx.ParkedListInLine(e.ctx, store.KeyRef{Consumer: e.consumer, Key: key})
	require.NoError(e.t, err)
	return ps
}

// parkOne parks p and returns it with the sequence number the store gave
// it (p must be the only held or blocked message of its identity).
func (e *txEnv) parkOne(p store.Parked) store.Parked {
	e.t.Helper()
	e.park(p)
	for _, q := range e.parkedForKey(p.PartitionKey) {
		if q.Source == p.Source && q.ID == p.ID {
			require.Positive(e.t, q.Seq)
			p.Seq = q.Seq
			return p
		}
	}
	e.t.Fatalf("parked %s/%s not found on key %s", p.Source, p.ID, p.PartitionKey)
	return p
}

// seqs returns the sequence numbers of ps.
func seqs(ps []store.Parked) []int64 {
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = p.Seq
	}
	return out
}

// ParkedInsert keeps every field, the envelope byte for byte, and gives each row
// a sequence number in arrival order; a hold deadline is kept, none reads
// back as zero.
func testPark(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	held := e.parked("order-1", "crm", "1", ptr(int64(3)), seqboxtype.ParkHeld, 1)
	held.HoldUntil = at(100)
	blocked := e.parked("order-1", "crm", "2", nil, seqboxtype.ParkBlocked, 2)
	blocked.Detail = ""
	held = e.parkOne(held)
	blocked = e.parkOne(blocked)
	require.Greater(t, blocked.Seq, held.Seq, "sequence numbers grow with arrival")
	require.Equal(t, []store.Parked{blocked, held}, e.parkedForKey("order-1"))
	require.Empty(t, e.parkedForKey("order-2"))
	other, err := e.tx.ParkedListInLine(e.ctx, store.KeyRef{Consumer: e.consumer + "/other", Key: "order-1"})
	require.NoError(t, err)
	require.Empty(t, other, "parked rows belong to one consumer")
}

// A collision is parked once per colliding payload: parking the same
// payload again adds no row, another payload does.
func testParkCollisionOnce(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	c := e.parked("order-1", "crm", "1", ptr(int64(2)), seqboxtype.ParkCollision, 1)
	e.park(c)
	again := c
	again.ParkedAt, again.Detail = at(50), "seen again"
	e.park(again)
	require.Equal(t, 1, e.count("seqbox_parked", "source = $2 AND id = $3", "crm", "1"), "the same payload again")
	c2 := c
	c2.PayloadHash = "sha256:other"
	e.park(c2)
	require.Equal(t, 2, e.count("seqbox_parked", "source = $2 AND id = $3", "crm", "1"), "another payload")
	c3 := c
	c3.ID = "2"
	e.park(c3)
	require.Equal(t, 1, e.count("seqbox_parked", "source = $2 AND id = $3", "crm", "2"), "another identity")
	c4 := c
	c4.Consumer += "/other"
	e.park(c4)
	var n int
	require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT COUNT(*) FROM seqbox_parked WHERE consumer = $1`, c4.Consumer).Scan(&n))
	require.Equal(t, 1, n, "another consumer")
	var detail string
	require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT detail FROM seqbox_parked
		WHERE consumer = $1 AND source = 'crm' AND id = '1' AND payload_hash = $2`, e.consumer, c.PayloadHash).Scan(&detail))
	require.Equal(t, c.Detail, detail, "the first row stays")
	require.Empty(t, e.parkedForKey("order-1"), "collisions are neither held nor blocked")
}

// ParkedListInLine lists the held and blocked messages of one key of one
// consumer: unversioned ones first, then by version, and arrival order
// among equals.
func testParkedForKeyOrder(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	v := func(n int64) *int64 { return &n }
	arrivals := []store.Parked{
		e.parked("k", "crm", "v5", v(5), seqboxtype.ParkHeld, 1),
		e.parked("k", "crm", "nil-a", nil, seqboxtype.ParkBlocked, 2),
		e.parked("k", "crm", "v3-a", v(3), seqboxtype.ParkHeld, 3),
		e.parked("k", "crm", "v0", v(0), seqboxtype.ParkBlocked, 4),
		e.parked("k", "crm", "nil-b", nil, seqboxtype.ParkHeld, 5),
		e.parked("k", "crm", "v3-b", v(3), seqboxtype.ParkBlocked, 6),
		e.parked("k", "crm", "v10", v(10), seqboxtype.ParkHeld, 7),
	}
	byID := map[string]store.Parked{}
	for _, p := range arrivals {
		byID[p.ID] = e.parkOne(p)
	}
	// Not listed: other reasons, other keys, other consumers.
	e.park(e.parked("k", "crm", "conflict", v(1), seqboxtype.ParkVersionConflict, 8))
	e.park(e.parked("k", "crm", "collision", v(1), seqboxtype.ParkCollision, 9))
	e.park(e.parked("k2", "crm", "other-key", v(1), seqboxtype.ParkHeld, 10))
	o := e.parked("k", "crm", "other-consumer", v(1), seqboxtype.ParkHeld, 11)
	o.Consumer += "/other"
	e.park(o)

	var want []store.Parked
	for _, id := range []string{"nil-a", "nil-b", "v0", "v3-a", "v3-b", "v5", "v10"} {
		want = append(want, byID[id])
	}
	require.Equal(t, want, e.parkedForKey("k"))
}

// ParkedDelete removes one row by its sequence number, and nothing else.
func testUnpark(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	a := e.parkOne(e.parked("k", "crm", "a", ptr(int64(1)), seqboxtype.ParkHeld, 1))
	b := e.parkOne(e.parked("k", "crm", "b", ptr(int64(2)), seqboxtype.ParkHeld, 2))
	c := e.parkOne(e.parked("k", "crm", "c", ptr(int64(3)), seqboxtype.ParkBlocked, 3))
	require.NoError(t, e.tx.ParkedDelete(e.ctx, b.Seq))
	require.Equal(t, []store.Parked{a, c}, e.parkedForKey("k"))
	require.NoError(t, e.tx.ParkedDelete(e.ctx, b.Seq), "unparking what is gone is no error")
	require.NoError(t, e.tx.ParkedDelete(e.ctx, c.Seq+1_000_000))
	require.Equal(t, []store.Parked{a, c}, e.parkedForKey("k"))
}

// ParkedSetReason moves the rows of one key with one reason to another,
// with the new hold deadline (zero: none); other reasons and keys stay.
func testSetParkedReason(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	h1 := e.parkOne(e.parked("k", "crm", "h1", ptr(int64(1)), seqboxtype.ParkHeld, 1))
	h2 := e.parked("k", "crm", "h2", ptr(int64(2)), seqboxtype.ParkHeld, 2)
	h2.HoldUntil = at(60)
	h2 = e.parkOne(h2)
	b := e.parkOne(e.parked("k", "crm", "b", ptr(int64(3)), seqboxtype.ParkBlocked, 3))
	e.park(e.parked("k", "crm", "c", ptr(int64(4)), seqboxtype.ParkCollision, 4))
	other := e.parked("k2", "crm", "o", ptr(int64(1)), seqboxtype.ParkHeld, 5)
	other.HoldUntil = at(70)
	other = e.parkOne(other)

	require.NoError(t, e.tx.ParkedSetReason(e.ctx, store.ParkedSetReasonParams{Consumer: e.consumer, Key: "k", From: seqboxtype.ParkHeld, To: seqboxtype.ParkBlocked, HoldUntil: time.Time{}}))
	h1.Reason, h2.Reason, h2.HoldUntil = seqboxtype.ParkBlocked, seqboxtype.ParkBlocked, time.Time{}
	require.Equal(t, []store.Parked{h1, h2, b}, e.parkedForKey("k"))
	require.Equal(t, []store.Parked{other}, e.parkedForKey("k2"), "another key is untouched")
	require.Equal(t, 1, e.count("seqbox_parked", "reason = $2", seqboxtype.ParkCollision), "another reason is untouched")

	require.NoError(t, e.tx.ParkedSetReason(e.ctx, store.ParkedSetReasonParams{Consumer: e.consumer, Key: "k", From: seqboxtype.ParkBlocked, To: seqboxtype.ParkHeld, HoldUntil: at(90)}))
	for _, p := range []*store.Parked{&h1, &h2, &b} {
		p.Reason, p.HoldUntil = seqboxtype.ParkHeld, at(90)
	}
	require.Equal(t, []store.Parked{h1, h2, b}, e.parkedForKey("k"))
	require.Equal(t, 1, e.count("seqbox_parked", "reason = $2", seqboxtype.ParkCollision))
}

// ParkedStartHolds gives a deadline to the held rows of a key that have none,
// and with Now to those whose deadline ran out by then, and to nothing else.
func testStartHolds(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	a := e.parkOne(e.parked("k", "crm", "a", ptr(int64(1)), seqboxtype.ParkHeld, 1))
	b := e.parked("k", "crm", "b", ptr(int64(2)), seqboxtype.ParkHeld, 2)
	b.HoldUntil = at(10)
	b = e.parkOne(b)
	c := e.parkOne(e.parked("k", "crm", "c", ptr(int64(3)), seqboxtype.ParkHeld, 3))
	d := e.parkOne(e.parked("k", "crm", "d", ptr(int64(4)), seqboxtype.ParkBlocked, 4))
	other := e.parkOne(e.parked("k2", "crm", "o", ptr(int64(1)), seqboxtype.ParkHeld, 5))

	require.NoError(t, e.tx.ParkedStartHolds(e.ctx, store.ParkedStartHoldsParams{Consumer: e.consumer, Key: "k", Until: at(99)}))
	a.HoldUntil, c.HoldUntil = at(99), at(99)
	require.Equal(t, []store.Parked{a, b, c, d}, e.parkedForKey("k"))
	require.Equal(t, []store.Parked{other}, e.parkedForKey("k2"))

	// With Now, the holds that ran out by then start over too (b's, at 10,
	// by 10), and the others keep theirs (a's and c's, at 99).
	require.NoError(t, e.tx.ParkedStartHolds(e.ctx, store.ParkedStartHoldsParams{Consumer: e.consumer, Key: "k", Until: at(120), Now: at(10)}))
	b.HoldUntil = at(120)
	require.Equal(t, []store.Parked{a, b, c, d}, e.parkedForKey("k"))
	require.Equal(t, []store.Parked{other}, e.parkedForKey("k2"))
}

// ParkedRehold makes one parked row held until a time, with a new detail.
func testRehold(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	a := e.parkOne(e.parked("k", "crm", "a", ptr(int64(1)), seqboxtype.ParkBlocked, 1))
	b := e.parkOne(e.parked("k", "crm", "b", ptr(int64(2)), seqboxtype.ParkBlocked, 2))
	require.NoError(t, e.tx.ParkedRehold(e.ctx, store.ParkedReholdParams{Seq: a.Seq, Until: at(30), Detail: "retrying: waits out its backoff"}))
	a.Reason, a.HoldUntil, a.Detail = seqboxtype.ParkHeld, at(30), "retrying: waits out its backoff"
	require.Equal(t, []store.Parked{a, b}, e.parkedForKey("k"))
	require.NoError(t, e.tx.ParkedRehold(e.ctx, store.ParkedReholdParams{Seq: a.Seq, Until: at(40), Detail: "again"}))
	a.HoldUntil, a.Detail = at(40), "again"
	require.Equal(t, []store.Parked{a, b}, e.parkedForKey("k"))
	require.Equal(t, []int64{a.Seq, b.Seq}, seqs(e.parkedForKey("k")), "the row keeps its sequence number")
}

package serve

import (
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/store"
)

// KeyItem is one key in GET /v1/admin/keys: the CLI's key report plus
// its age, the version that was received (the lowest parked one) and the
// next action as an API call.
type KeyItem struct {
	ops.KeyReport
	// Received is the lowest version waiting behind the key, next to
	// Expected, the version that may apply next.
	Received   *int64   `json:"received"`
	AgeSeconds *float64 `json:"age_seconds"`
	// NextAction says what to do, in words; Actions are the calls that
	// do it (method and path).
	NextAction string      `json:"next_action"`
	Actions    []APIAction `json:"actions"`
}

// APIAction is an admin call that moves a key on.
type APIAction struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	Path   string `json:"path"`
}

// ParkedView is one parked message, the one JSON view of it (the admin
// API's and `seqbox keys show --output json`'s).
type ParkedView struct {
	Seq           int64   `json:"seq"`
	Source        string  `json:"source"`
	ID            string  `json:"id"`
	PartitionKey  string  `json:"partitionkey"`
	ObjectVersion *int64  `json:"objectversion"`
	Reason        string  `json:"reason"`
	Detail        string  `json:"detail"`
	PayloadHash   string  `json:"payload_hash"`
	ParkedAt      *string `json:"parked_at"`
	HoldUntil     *string `json:"hold_until"`
	Envelope      Payload `json:"envelope"`
}

// Payload is an envelope as stored: Text when it is valid UTF-8 (always,
// for anything that passed validation), Base64 otherwise.
type Payload struct {
	Text   *string `json:"text,omitempty"`
	Base64 []byte  `json:"base64,omitempty"`
	Bytes  int     `json:"bytes"`
}

func payload(b []byte) Payload {
	p := Payload{Bytes: len(b)}
	if utf8.Valid(b) {
		s := string(b)
		p.Text = &s
	} else {
		p.Base64 = b
	}
	return p
}

// GapView is one recorded gap, the one JSON view of it.
type GapView struct {
	From      int64   `json:"from_version"`
	To        int64   `json:"to_version"`
	DecidedBy string  `json:"decided_by"`
	Reason    string  `json:"reason"`
	At        *string `json:"at"`
}

// AuditView is one audit row, the one JSON view of it (GET keys/{key},
// GET audit and `seqbox keys show --output json`).
type AuditView struct {
	Seq             int64   `json:"seq"`
	Source          string  `json:"source"`
	ID              string  `json:"id"`
	PartitionKey    string  `json:"partitionkey"`
	ReceivedVersion *int64  `json:"received_version"`
	CurrentVersion  *int64  `json:"current_version"`
	Outcome         string  `json:"outcome"`
	Reason          string  `json:"reason"`
	NextAction      string  `json:"next_action"`
	At              *string `json:"at"`
}

// KeyDetailView is GET /v1/admin/keys/{key}: the key as GET keys lists
// it, and what is recorded about it.
type KeyDetailView struct {
	KeyItem
	KeyRecord
}

// KeyRecord is what is recorded about one key, the one JSON view of it:
// the admin API's (KeyDetailView) and `seqbox keys show --output json`'s,
// which prints it after the key's report.
type KeyRecord struct {
	// FirstVersion says where the key's versions start, and by which rule.
	FirstVersion ops.FirstVersionRule `json:"first_version"`
	// Parked is a page of the parked messages (the lowest versions, or
	// from after ?parked_after=), ParkedTotal counts them all, and
	// ParkedNext, when more follow, is the next page's parked_after.
	Parked      []ParkedView `json:"parked"`
	ParkedTotal int          `json:"parked_total"`
	ParkedNext  *string      `json:"parked_next"`
	Gaps        []GapView    `json:"gaps"`
	Audit       []AuditView  `json:"audit"`
}

// KeyRecordOf is what d records about its key, as the admin API and the
// CLI's JSON show it; each list is [] when empty.
func KeyRecordOf(d ops.KeyDetail) KeyRecord {
	v := KeyRecord{FirstVersion: d.FirstVersion, Parked: []ParkedView{}, ParkedTotal: d.ParkedTotal,
		ParkedNext: ops.ParkedCursorText(d.ParkedNext), Gaps: []GapView{}, Audit: []AuditView{}}
	for _, p := range d.Parked {
		v.Parked = append(v.Parked, ParkedViewOf(p))
	}
	for _, g := range d.Gaps {
		v.Gaps = append(v.Gaps, GapViewOf(g))
	}
	for _, a := range d.Audit {
		v.Audit = append(v.Audit, AuditViewOf(a))
	}
	return v
}

// DeadLetterView is one DLQ row, the one JSON view of it: the admin API's
// and `seqbox dlq list|show --output json`'s. Envelope only in GET
// dlq/{seq} and dlq show.
type DeadLetterView struct {
	Seq           int64   `json:"seq"`
	Source        string  `json:"source"`
	ID            string  `json:"id"`
	PartitionKey  string  `json:"partitionkey"`
	ObjectVersion *int64  `json:"objectversion"`
	Reason        string  `json:"reason"`
	Attempts      int     `json:"attempts"`
	FirstError    string  `json:"first_error"`
	LastError     string  `json:"last_error"`
	DeadAt        *string `json:"dead_at"`
	State         string  `json:"state"`
	Resolution    string  `json:"resolution"`
	ResolvedAt    *string `json:"resolved_at"`
	PayloadHash   string  `json:"payload_hash"`
	// Redrives and History: the redrives after which the message failed
	// again on this row, which kept its number.
	Redrives int      `json:"redrives"`
	History  []string `json:"history"`
	Envelope *Payload `json:"envelope,omitempty"`
}

// DeadLetterViewOf is d as the admin API and the CLI's JSON show it; full
// adds its envelope.
func DeadLetterViewOf(letter store.DeadLetter, full bool) DeadLetterView {
	v := DeadLetterView{Seq: letter.Seq, Source: letter.Source, ID: letter.ID, PartitionKey: letter.PartitionKey, ObjectVersion: letter.ObjectVersion,
		Reason: letter.Reason, Attempts: letter.Attempts, FirstError: letter.FirstError, LastError: letter.LastError, DeadAt: stamp(letter.DeadAt),
		State: string(letter.State), Resolution: letter.Resolution, PayloadHash: letter.PayloadHash, Redrives: letter.Redrives, History: letter.History}
	if v.History == nil {
		v.History = []string{}
	}
	if letter.ResolvedAt != nil {
		v.ResolvedAt = stamp(*letter.ResolvedAt)
	}
	if full {
		p := payload(letter.Envelope)
		v.Envelope = &p
	}
	return v
}

// ParkedViewOf is p as the admin API and the CLI's JSON show it.
func ParkedViewOf(p store.Parked) ParkedView {
	return ParkedView{Seq: p.Seq, Source: p.Source, ID: p.ID, PartitionKey: p.PartitionKey, ObjectVersion: p.ObjectVersion,
		Reason: string(p.Reason), Detail: p.Detail, PayloadHash: p.PayloadHash, ParkedAt: stamp(p.ParkedAt), HoldUntil: stamp(p.HoldUntil),
		Envelope: payload(p.Envelope)}
}

// GapViewOf is g as the admin API and the CLI's JSON show it.
func GapViewOf(g store.Gap) GapView {
	return GapView{From: g.FromVersion, To: g.ToVersion, DecidedBy: g.DecidedBy, Reason: g.Reason, At: stamp(g.At)}
}

// AuditViewOf is a as the admin API and the CLI's JSON show it.
func AuditViewOf(a store.AuditRow) AuditView {
	return AuditView{Seq: a.Seq, Source: a.Source, ID: a.ID, PartitionKey: a.PartitionKey, ReceivedVersion: a.ReceivedVersion,
		CurrentVersion: a.CurrentVersion, Outcome: string(a.Outcome), Reason: a.Reason, NextAction: a.NextAction, At: stamp(a.At)}
}

// keyItem adds the API's view of the next action to a key report.
func keyItem(rep ops.KeyReport, now time.Time) KeyItem {
	it := KeyItem{KeyReport: rep, Received: rep.LowestParked}
	if rep.Since != nil {
		if t, err := time.Parse(time.RFC3339Nano, *rep.Since); err == nil {
			age := now.Sub(t).Seconds()
			it.AgeSeconds = &age
		}
	}
	key := PathSegment(rep.PartitionKey)
	switch {
	case rep.BlockedBy != nil && rep.BlockedBy.DLQSeq != nil && rep.BlockedBy.OpenCall != nil:
		call := rep.BlockedBy.OpenCall
		if call.State == "uncertain" {
			it.NextAction = "resolve call " + call.IdempotencyKey + " from what the remote side shows (succeeded with its reference, or failed), " +
				"then redrive dead letter " + itoa(*rep.BlockedBy.DLQSeq) + " (skip and redrive are refused or fail while it is uncertain)"
			it.Actions = []APIAction{{"resolve", "POST", "/v1/admin/effects/" + PathSegment(call.IdempotencyKey) + "/resolve"}}
		} else {
			it.NextAction = rep.Action
		}
	case rep.BlockedBy != nil && rep.BlockedBy.DLQSeq != nil:
		seq := itoa(*rep.BlockedBy.DLQSeq)
		it.NextAction = "redrive dead letter " + seq + " once the cause is fixed, or skip it (a skip needs by and reason)"
		it.Actions = []APIAction{{"redrive", "POST", "/v1/admin/dlq/" + seq + "/redrive"}, {"skip", "POST", "/v1/admin/dlq/" + seq + "/skip"}}
	case rep.Blocked:
		it.NextAction = "release the key with a recorded gap (by and reason required), or deliver the missing version"
		it.Actions = []APIAction{{"release", "POST", "/v1/admin/keys/" + key + "/release"}}
	case rep.Status == ops.StatusHeld:
		it.NextAction = rep.Action
	case rep.Turn != nil:
		// A turn holder with nothing parked behind it (retrying, or being
		// decided): keys release ends its turn, refused while its call is
		// open or it is being decided.
		it.NextAction = rep.Action
		it.Actions = []APIAction{{"release", "POST", "/v1/admin/keys/" + key + "/release"}}
	default:
		it.NextAction = "none"
	}
	return it
}

// RedactURL hides the password in a URL (a postgres:// --db, an
// --agent-url) for logs and messages; a path without "://" is returned as
// it is.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

// PathSegment is s escaped as one segment of an admin API path: "." and
// ".." as %2E, which no HTTP stack takes for the current or parent
// directory (url.PathEscape leaves dots as they are, and a client or
// browser drops such a segment).
func PathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

package seqboxtype

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/jsonkind"
)

// MaxEventSize is the largest envelope ParseEvent accepts, in bytes.
const MaxEventSize = 1 << 20

// defaultVolatile are the attributes left out of the payload hash unless a
// consumer names others: they change between publications of the same fact.
var defaultVolatile = []string{"publishedat", "traceparent", "tracestate", "deliverycount", "deliveryattempt"}

// DefaultVolatileAttributes returns the attributes ParseEvent leaves out of
// the payload hash: they change between publications of the same fact
// (publishedat, traceparent, tracestate, deliverycount, deliveryattempt).
// The slice is a copy; changing it changes nothing.
func DefaultVolatileAttributes() []string { return append([]string(nil), defaultVolatile...) }

// Event is a CloudEvents 1.0 envelope in structured JSON mode, with the
// extension attributes seqbox uses for identity, ordering and business
// deduplication.
type Event struct {
	// ID is the id attribute: with Source, the producer's identity of the
	// fact. Required and never blank.
	ID string
	// Source is the source attribute: with ID, the producer's identity of
	// the fact. Required and never blank.
	Source string
	// Type is the event type ("order.cancelled"). Required and never
	// blank.
	Type string
	// SpecVersion is the specversion attribute: "1.0", or empty when the
	// envelope has none.
	SpecVersion string
	// Time is when the fact happened at the source (zero when absent).
	Time time.Time
	// PartitionKey is the business object whose events are ordered.
	PartitionKey string
	// ObjectVersion is the source-assigned version of that object; nil when
	// the event carries none (ordered by arrival only).
	ObjectVersion *int64
	// BusinessKey names the effect the event asks for, catching the same
	// effect requested under a new id.
	BusinessKey string
	// CausationID is the causationid extension attribute as sent (empty
	// when absent).
	CausationID string
	// TenantID is the tenantid extension attribute (empty when absent),
	// kept on the inbox row as its tenant.
	TenantID string
	// DataSchema is the dataschema attribute (empty when absent), kept on
	// the inbox row as its contract version.
	DataSchema string
	// TraceParent and TraceState are the CloudEvents distributed-tracing
	// extension: the W3C trace context of the producer. They are read
	// leniently (a value that is not a string is left out, never refused)
	// and are volatile: they do not enter the payload hash.
	TraceParent string
	// TraceState is the tracestate that goes with TraceParent (empty when
	// absent or unreadable).
	TraceState string
	// PublishedAt is the publishedat extension attribute, an RFC 3339 time
	// a producer or relay stamps when it publishes the event (zero when
	// absent or unreadable: read leniently, as it is volatile and does not
	// enter the payload hash). The lag metrics read it.
	PublishedAt time.Time
	// Data is the event's data member exactly as it appears in Raw (a
	// sub-slice of it): not re-encoded, so numbers keep every digit and
	// strings their escapes. Two deliveries of one fact may differ here in
	// whitespace or spelling; compare Hash, not Data. Nil when the
	// envelope has no data member.
	Data json.RawMessage
	// Raw is the envelope exactly as received.
	Raw []byte
	// Hash is the hex SHA-256 of the RFC 8785 (JCS) canonical form of the
	// envelope without volatile attributes (see payloadHash).
	Hash string
}

// ParseEvent parses and validates a structured-mode CloudEvent and computes
// its payload hash with DefaultVolatileAttributes excluded. Errors are
// *InvalidEventError, match ErrInvalidEvent and always name a field: the
// attribute, the JSON path of a problem inside data ("data.items[2].name"),
// or "envelope" for the document as a whole.
//
// Parsing is strict (docs/design.md §3): input with more than one meaning has no
// identity and is refused. That is bytes that are not valid UTF-8, a lone
// surrogate escape ("\udc01") and a member name repeated in one object
// ("id" and "\u0069d" are the same name), at any depth, and numbers that
// the payload hash cannot hold exactly: beyond a double's range (1e400), or
// not exactly the decimal RFC 8785 writes for them (9007199254740993,
// which it writes 9007199254740992; see hashedNumber). Control
// characters are refused in the identity and ordering keys (keyText).
func ParseEvent(raw []byte) (Event, error) {
	return ParseEventExcluding(raw, defaultVolatile)
}

// ParseEventExcluding is ParseEvent with the volatile attributes a
// consumer's Config.VolatileAttributes names: they are left out of the
// payload hash.
func ParseEventExcluding(raw []byte, volatile []string) (Event, error) {
	if len(raw) > MaxEventSize {
		return Event{}, invalid("envelope", "%d bytes, larger than the %d-byte limit", len(raw), MaxEventSize)
	}
	sc := scratchPool.Get().(*envScratch)
	defer sc.release()
	members, err := sc.scan(raw)
	if err != nil {
		return Event{}, err
	}
	// The member offsets hold for the copy too; the member names may point
	// into raw, and are only read during this call.
	ev := Event{Raw: append([]byte(nil), raw...)}
	env := envelope{raw: ev.Raw, members: members}
	if ev.ID, err = env.requiredString("id"); err != nil {
		return Event{}, err
	}
	if ev.Source, err = env.requiredString("source"); err != nil {
		return Event{}, err
	}
	if ev.Type, err = env.requiredString("type"); err != nil {
		return Event{}, err
	}
	if ev.SpecVersion, err = env.optionalString("specversion"); err != nil {
		return Event{}, err
	}
	if ev.SpecVersion != "" && ev.SpecVersion != "1.0" {
		return Event{}, invalid("specversion", "%s is not supported, want \"1.0\"", quoteTrunc(ev.SpecVersion))
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"partitionkey", &ev.PartitionKey}, {"businesskey", &ev.BusinessKey},
		{"causationid", &ev.CausationID}, {"tenantid", &ev.TenantID}, {"dataschema", &ev.DataSchema},
	} {
		if *f.dst, err = env.optionalString(f.name); err != nil {
			return Event{}, err
		}
	}
	// Tracing context is advisory: a malformed one is ignored, as W3C
	// trace context asks, rather than costing the event.
	ev.TraceParent = env.lenientString("traceparent")
	ev.TraceState = env.lenientString("tracestate")
	if pa := env.lenientString("publishedat"); pa != "" {
		ev.PublishedAt, _ = time.Parse(time.RFC3339Nano, pa) // advisory: unreadable reads as absent
	}
	ts, err := env.optionalString("time")
	if err != nil {
		return Event{}, err
	}
	if ts != "" {
		if ev.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return Event{}, invalid("time", "%s is not an RFC 3339 timestamp", quoteTrunc(ts))
		}
	}
	if ev.ObjectVersion, err = env.objectVersion(); err != nil {
		return Event{}, err
	}
	for _, k := range []struct{ name, value string }{
		{"id", ev.ID}, {"source", ev.Source}, {"type", ev.Type}, {"partitionkey", ev.PartitionKey}, {"businesskey", ev.BusinessKey},
	} {
		if err := keyText(k.name, k.value); err != nil {
			return Event{}, err
		}
	}
	if ev.ObjectVersion != nil && ev.PartitionKey == "" {
		return Event{}, invalid("objectversion", "set without a partitionkey: a version is only meaningful per business object")
	}
	if m := env.member("data"); m != nil {
		ev.Data = json.RawMessage(ev.Raw[m.valAt:m.valEnd:m.valEnd])
	}
	if ev.Hash, err = payloadHash(ev.Raw, members, volatile); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// MaxAttributeSize bounds the attributes seqbox stores in keys and indexes
// (id, source, partitionkey, businesskey, ...), in bytes.
const MaxAttributeSize = 1024

// envelope is a scanned envelope: its bytes and where its members are.
type envelope struct {
	raw     []byte
	members []envMember
}

// member returns the top-level member with that name, nil when absent
// (names are unique: the scanner refuses duplicates).
func (e envelope) member(name string) *envMember {
	for k := range e.members {
		if string(e.members[k].name) == name {
			return &e.members[k]
		}
	}
	return nil
}

// text is a string member's unescaped value.
func (e envelope) text(m *envMember) string {
	b := e.raw[m.valAt+1 : m.valEnd-1]
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	return string(unquote(b, make([]byte, 0, len(b))))
}

func (e envelope) requiredString(name string) (string, error) {
	m := e.member(name)
	if m == nil {
		return "", invalid(name, "required attribute is missing")
	}
	if c := m.kind(e.raw); c != '"' {
		return "", invalid(name, "must be a string, not %s", jsonkind.Of(c))
	}
	s := e.text(m)
	if strings.TrimSpace(s) == "" {
		return "", invalid(name, "must not be empty")
	}
	return s, storable(name, s)
}

// storable refuses what a database cannot index or store as text: NUL
// bytes (PostgreSQL rejects them) and values over MaxAttributeSize.
func storable(name, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(name, "contains a NUL character")
	}
	if len(s) > MaxAttributeSize {
		return invalid(name, "is %d bytes, longer than the %d-byte limit", len(s), MaxAttributeSize)
	}
	return nil
}

// keyText refuses a control character (U+0000 to U+001F, and DEL,
// U+007F) in an identity or ordering key: id, source, type, partitionkey
// and businesskey. Those travel in headers (the gateway's
// Seqbox-Partition-Key to the agent, a broker's message headers), which
// cannot carry CR, LF or the other controls, so an event holding one
// would fail at every attempt; they are table cells and arguments of
// `seqbox keys` and `seqbox dlq`, where a line break splits a row and an
// escape sequence drives the terminal; and two keys that differ only in
// an invisible character would look like one. Other attributes and data
// are text, where a control character is a character like any other.
func keyText(name, s string) error {
	for k := 0; k < len(s); k++ {
		if c := s[k]; c < 0x20 || c == 0x7f {
			return invalid(name, "contains a control character (U+%04X at byte %d): an identity or ordering key holds none of "+
				"U+0000 to U+001F and U+007F, as it travels in HTTP headers, which refuse them, and shows in tables", c, k)
		}
	}
	return nil
}

func (e envelope) optionalString(name string) (string, error) {
	m := e.member(name)
	if m == nil || m.kind(e.raw) == 'n' {
		return "", nil
	}
	if c := m.kind(e.raw); c != '"' {
		return "", invalid(name, "must be a string, not %s", jsonkind.Of(c))
	}
	s := e.text(m)
	return s, storable(name, s)
}

// lenientString is optionalString for advisory attributes: a value that
// would be refused reads as absent.
func (e envelope) lenientString(name string) string {
	s, err := e.optionalString(name)
	if err != nil {
		return ""
	}
	return s
}

// maxSafeInteger is the largest integer n such that every integer up to n
// is a distinct IEEE-754 double (2^53-1, JavaScript's
// Number.MAX_SAFE_INTEGER, the interoperable limit of RFC 7493 I-JSON).
const maxSafeInteger = 1<<53 - 1

// objectVersion accepts a JSON integer or a string holding one (CloudEvents
// extensions are often strings on the wire), written as an integer: 7 or
// "7", not 7.0 or 7e0.
//
// The version is read exactly, as an int64, but the payload hash reads a
// JSON number as RFC 8785 does, as an IEEE-754 double: 9007199254740993
// would be version 9007199254740993 and hash as 9007199254740992, one
// envelope with two meanings. So a version written as a JSON number must be
// at most 2^53-1; a larger one is sent as a string ("9007199254740993"),
// which the hash compares exactly.
func (e envelope) objectVersion() (*int64, error) {
	m := e.member("objectversion")
	if m == nil || m.kind(e.raw) == 'n' {
		return nil, nil
	}
	var text string
	switch c := m.kind(e.raw); {
	case c == '"':
		text = e.text(m)
	case c == '-' || '0' <= c && c <= '9':
		text = string(e.raw[m.valAt:m.valEnd])
	default:
		return nil, invalid("objectversion", "must be an integer, not %s", jsonkind.Of(c))
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return nil, invalid("objectversion", "%s does not fit in a 64-bit integer", quoteTrunc(text))
	}
	if err != nil {
		if f, ferr := strconv.ParseFloat(text, 64); ferr == nil && f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger {
			// 1.0 or 1e0: an integer's value, not written as one.
			return nil, invalid("objectversion", "%s is not written as an integer: write %s or %q",
				quoteTrunc(text), strconv.FormatFloat(f, 'f', -1, 64), strconv.FormatFloat(f, 'f', -1, 64))
		}
		return nil, invalid("objectversion", "%s is not an integer", quoteTrunc(text))
	}
	if n < 0 {
		return nil, invalid("objectversion", "%d is negative", n)
	}
	if n > maxSafeInteger && m.kind(e.raw) != '"' {
		return nil, invalid("objectversion", "%d is larger than 2^53-1 as a JSON number, which RFC 8785 reads as a double; send it as a string", n)
	}
	return &n, nil
}

// payloadHash is the hex SHA-256 of the RFC 8785 (JCS) canonical form of
// the envelope without its volatile attributes, computed by
// github.com/gowebpki/jcs (or, for the plain documents most envelopes are,
// by canonicalPlain, which gives the same bytes).
//
// JCS compares by value: member order, insignificant whitespace, string
// escapes ("é" and "\u00e9") and number spelling (25, 25.0, 2.5e1) do not
// change the hash. Numbers are IEEE-754 doubles in RFC 8785, as in
// JavaScript's JSON.parse, so a literal that is not exactly the decimal
// RFC 8785 writes for its double would share its hash with other numbers
// (9007199254740993 would hash as 9007199254740992, 1e-400 as 0): the
// scanner refused those (hashedNumber), and numbers too large for a
// double (1e400), which have no RFC 8785 form. Every number left hashes
// as exactly its value; a producer that needs more digits sends them as
// a string.
//
// raw has been checked by scanEnvelope, which jcs relies on: jcs also
// refuses duplicate names, invalid UTF-8 and lone surrogates, but without
// saying where.
func payloadHash(raw []byte, members []envMember, volatile []string) (string, error) {
	doc := raw
	for k := range members {
		if isVolatile(members[k].name, volatile) {
			doc = withoutVolatile(raw, members, volatile)
			break
		}
	}
	form, err := canonical(doc)
	if err != nil {
		return "", invalid("envelope", "cannot canonicalise (RFC 8785): %v", err)
	}
	sum := sha256.Sum256(form)
	return hex.EncodeToString(sum[:]), nil
}

func isVolatile(name []byte, volatile []string) bool {
	for _, v := range volatile {
		if string(name) == v {
			return true
		}
	}
	return false
}

// withoutVolatile is the envelope object with the volatile members left
// out, every other member copied as it is.
func withoutVolatile(raw []byte, members []envMember, volatile []string) []byte {
	doc := make([]byte, 0, len(raw))
	doc = append(doc, '{')
	for k := range members {
		m := &members[k]
		if isVolatile(m.name, volatile) {
			continue
		}
		if len(doc) > 1 {
			doc = append(doc, ',')
		}
		doc = append(doc, raw[m.nameAt:m.valEnd]...)
	}
	return append(doc, '}')
}

// Version returns the object version and whether the event carries one.
func (e Event) Version() (int64, bool) {
	if e.ObjectVersion == nil {
		return 0, false
	}
	return *e.ObjectVersion, true
}

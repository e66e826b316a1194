package seqbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// MaxEventSize is the largest envelope ParseEvent accepts, in bytes.
const MaxEventSize = 1 << 20

// DefaultVolatileAttributes are left out of the payload hash: they change
// between publications of the same fact (DESIGN §1).
var DefaultVolatileAttributes = []string{"publishedat", "traceparent", "tracestate", "deliverycount", "deliveryattempt"}

// Event is a CloudEvents 1.0 envelope in structured JSON mode, with the
// extension attributes seqbox uses for identity, ordering and business
// deduplication.
type Event struct {
	ID          string
	Source      string
	Type        string
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
	CausationID string
	TenantID    string
	DataSchema  string
	// Data is the event's data member, verbatim.
	Data json.RawMessage
	// Raw is the envelope exactly as received.
	Raw []byte
	// Hash is the hex SHA-256 of the canonical envelope without volatile
	// attributes.
	Hash string
}

// ParseEvent parses and validates a structured-mode CloudEvent and computes
// its payload hash with DefaultVolatileAttributes excluded. Errors match
// ErrInvalidEvent and name the offending field.
func ParseEvent(raw []byte) (Event, error) {
	return parseEvent(raw, DefaultVolatileAttributes)
}

func parseEvent(raw []byte, volatile []string) (Event, error) {
	if len(raw) > MaxEventSize {
		return Event{}, invalid("", "envelope is %d bytes, larger than the %d-byte limit", len(raw), MaxEventSize)
	}
	var attrs map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&attrs); err != nil {
		return Event{}, invalid("", "not a JSON object: %v", err)
	}
	if dec.More() {
		return Event{}, invalid("", "trailing data after the JSON object")
	}
	if attrs == nil {
		return Event{}, invalid("", "not a JSON object")
	}
	ev := Event{Raw: append([]byte(nil), raw...)}
	var err error
	if ev.ID, err = requiredString(attrs, "id"); err != nil {
		return Event{}, err
	}
	if ev.Source, err = requiredString(attrs, "source"); err != nil {
		return Event{}, err
	}
	if ev.Type, err = requiredString(attrs, "type"); err != nil {
		return Event{}, err
	}
	if ev.SpecVersion, err = optionalString(attrs, "specversion"); err != nil {
		return Event{}, err
	}
	if ev.SpecVersion != "" && ev.SpecVersion != "1.0" {
		return Event{}, invalid("specversion", "%q is not supported, want \"1.0\"", ev.SpecVersion)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"partitionkey", &ev.PartitionKey}, {"businesskey", &ev.BusinessKey},
		{"causationid", &ev.CausationID}, {"tenantid", &ev.TenantID}, {"dataschema", &ev.DataSchema},
	} {
		if *f.dst, err = optionalString(attrs, f.name); err != nil {
			return Event{}, err
		}
	}
	ts, err := optionalString(attrs, "time")
	if err != nil {
		return Event{}, err
	}
	if ts != "" {
		if ev.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
			return Event{}, invalid("time", "%q is not an RFC 3339 timestamp", ts)
		}
	}
	if ev.ObjectVersion, err = objectVersion(attrs); err != nil {
		return Event{}, err
	}
	if ev.ObjectVersion != nil && ev.PartitionKey == "" {
		return Event{}, invalid("objectversion", "set without a partitionkey: a version is only meaningful per business object")
	}
	if d, ok := attrs["data"]; ok {
		if ev.Data, err = json.Marshal(d); err != nil {
			return Event{}, invalid("data", "%v", err)
		}
	}
	if ev.Hash, err = payloadHash(attrs, volatile); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// MaxAttributeSize bounds the attributes seqbox stores in keys and indexes
// (id, source, partitionkey, businesskey, ...), in bytes.
const MaxAttributeSize = 1024

func requiredString(attrs map[string]any, name string) (string, error) {
	v, ok := attrs[name]
	if !ok {
		return "", invalid(name, "required attribute is missing")
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid(name, "must be a string")
	}
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

func optionalString(attrs map[string]any, name string) (string, error) {
	v, ok := attrs[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid(name, "must be a string")
	}
	return s, storable(name, s)
}

// objectVersion accepts a JSON integer or a string holding one (CloudEvents
// extensions are often strings on the wire).
func objectVersion(attrs map[string]any) (*int64, error) {
	v, ok := attrs["objectversion"]
	if !ok || v == nil {
		return nil, nil
	}
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = x
	default:
		return nil, invalid("objectversion", "must be an integer")
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return nil, invalid("objectversion", "%q is not an integer", text)
	}
	if n < 0 {
		return nil, invalid("objectversion", "%d is negative", n)
	}
	return &n, nil
}

// payloadHash is SHA-256 over the canonical JSON of the envelope without
// volatile attributes: keys sorted, no insignificant whitespace, no HTML
// escaping (RFC 8785 style).
func payloadHash(attrs map[string]any, volatile []string) (string, error) {
	stripped := make(map[string]any, len(attrs))
	for k, v := range attrs {
		stripped[k] = v
	}
	for _, k := range volatile {
		delete(stripped, k)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(stripped); err != nil {
		return "", invalid("", "cannot canonicalise: %v", err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}

// Version returns the object version and whether the event carries one.
func (e Event) Version() (int64, bool) {
	if e.ObjectVersion == nil {
		return 0, false
	}
	return *e.ObjectVersion, true
}

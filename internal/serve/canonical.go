package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/seqbox/seqbox/internal/jsonkind"
	"github.com/seqbox/seqbox/seqboxtype"
)

// This file is what the gateway adds to seqboxtype.ParseEvent for the events
// it ingests: the CloudEvents rules ParseEvent leaves to each transport,
// and one canonical envelope per fact whatever the mode that carried it.
//
// ParseEvent is shared by every transport, by the outbox and by `seqbox
// replay`, whose files may omit specversion (docs/design.md §3 requires only id,
// source and type), and it must keep reading what is already queued. So
// the stricter rules below apply at the gateway's door only, before
// anything is stored.

// ingestEvent validates one envelope of POST /v1/events and returns it
// parsed, with the bytes to queue: the envelope in the gateway's canonical
// form (see canonicalize), which is raw itself when raw is already
// canonical. Errors are *seqboxtype.InvalidEventError naming the field.
func ingestEvent(raw []byte) (seqboxtype.Event, []byte, error) {
	ev, err := seqboxtype.ParseEvent(raw)
	if err != nil {
		return seqboxtype.Event{}, nil, err
	}
	members, err := topMembers(raw)
	if err != nil {
		return seqboxtype.Event{}, nil, err
	}
	if err := checkAttributes(members); err != nil {
		return seqboxtype.Event{}, nil, err
	}
	canon, changed := canonicalize(members)
	if !changed {
		return ev, raw, nil
	}
	if ev, err = seqboxtype.ParseEvent(canon); err != nil {
		return seqboxtype.Event{}, nil, err
	}
	return ev, canon, nil
}

// member is one top-level member of an envelope: its unescaped name and
// its value exactly as received.
type member struct {
	name  string
	value json.RawMessage
}

// kind is the value's first byte: '"', '{', '[', 't', 'f', 'n', or '-' or
// a digit for a number.
func (m member) kind() byte { return m.value[0] }

// topMembers lists the envelope's members in document order. raw has
// passed seqboxtype.ParseEvent: it is one JSON object, valid UTF-8, with no
// member name repeated.
func topMembers(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, invalidf("envelope", "not a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidf("envelope", "%v", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalidf("envelope", "%v", err)
		}
		out = append(out, member{name: name, value: v})
	}
	return out, nil
}

// checkAttributes applies the CloudEvents 1.0 rules of the JSON event
// format that seqboxtype.ParseEvent does not, and the same attribute-name rule
// as binary mode: specversion is present; every member but data and
// data_base64 is an attribute named by 1 to 20 lowercase letters or
// digits, whose value is a string, a number, a boolean or null (absent),
// never an object or an array; data and data_base64 are not both present;
// data_base64 is a string of standard base64 (RFC 4648 §4, padded, no
// stray bits). The error names the offending member.
func checkAttributes(members []member) error {
	hasData, hasBase64, hasSpec := false, false, false
	for _, m := range members {
		switch m.name {
		case "data":
			hasData = true
			continue
		case "data_base64":
			hasBase64 = m.kind() != 'n'
			if err := checkBase64(m); err != nil {
				return err
			}
			continue
		case "specversion":
			hasSpec = m.kind() != 'n'
		}
		if m.name == "" {
			return invalidf("envelope", "a member has an empty name: a CloudEvents attribute name is 1 to 20 lowercase letters or digits")
		}
		if !validAttrName(m.name) {
			return invalidf(fieldName(m.name), "%s is not a CloudEvents attribute name: 1 to 20 lowercase letters or digits (only data and data_base64 differ)",
				strconv.Quote(fieldName(m.name)))
		}
		if c := m.kind(); c == '{' || c == '[' {
			return invalidf(m.name, "must be a string, a number or a boolean, not %s: an attribute has one value, and only data holds structured values",
				jsonkind.Of(c))
		}
	}
	if !hasSpec {
		return invalidf("specversion", "required attribute is missing: a CloudEvent says \"specversion\":\"1.0\"")
	}
	if hasData && hasBase64 {
		return invalidf("data_base64", "both data and data_base64 are set: an event has one data, send one of them")
	}
	return nil
}

// checkBase64 refuses a data_base64 that is not a string of standard,
// padded base64 (null counts as absent). Strict decoding also refuses
// nonzero padding bits, so that one byte string has one spelling.
func checkBase64(m member) error {
	if m.kind() == 'n' {
		return nil
	}
	var s string
	if m.kind() != '"' || json.Unmarshal(m.value, &s) != nil {
		return invalidf("data_base64", "must be a string of base64, not %s", jsonkind.Of(m.kind()))
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(s); err != nil || strings.ContainsAny(s, "\r\n") {
		if err == nil {
			return invalidf("data_base64", "is not standard base64: line breaks are not allowed")
		}
		return invalidf("data_base64", "is not standard base64 (RFC 4648 §4, padded): %v", err)
	}
	return nil
}

// canonicalize returns the envelope in the gateway's canonical form, and
// whether that differs from the members as received. It is the one rule
// that makes the same fact hash the same whichever mode carried it: in
// binary mode every attribute is a header, that is a string, the data's
// type is the Content-Type, and an absent attribute has no header; in
// structured mode an attribute may be a JSON number or boolean, a version
// may be a string, the default application/json may be implied, and an
// attribute may be null. So:
//
//   - objectversion is its decimal integer ("5", "05" and 5 are version
//     5; ParseEvent has checked it is one): a JSON number when it is at
//     most 2^53-1, a string above that, where a JSON number would lose
//     digits (RFC 8785 reads numbers as doubles);
//   - every other attribute whose value is a number or a boolean is
//     written as the string of its CloudEvents canonical representation,
//     as a ce-* header carries it (3 and 3.0 become "3", true "true"): in
//     binary mode the type of an extension is not known, and a string
//     holds any value without loss;
//   - datacontenttype is left out when it is application/json (with at
//     most a charset=utf-8 parameter, JSON's only encoding) and the data,
//     if any, is in data: the JSON event format says an absent
//     datacontenttype means exactly that;
//   - an attribute whose value is null is left out (null means absent, as
//     seqboxtype.ParseEvent reads it); data is kept as it is, null or not.
//
// Everything else (data's bytes, the strings' escapes, member order) is
// kept as received: RFC 8785 already makes those irrelevant to the hash.
// The envelope is rebuilt only when a rule changes it.
func canonicalize(members []member) ([]byte, bool) {
	hasBase64 := false
	for _, m := range members {
		hasBase64 = hasBase64 || m.name == "data_base64" && m.kind() != 'n'
	}
	changed := false
	out := make([]byte, 0, 256)
	out = append(out, '{')
	for _, m := range members {
		v := []byte(m.value)
		switch {
		case m.name == "data":
		case m.kind() == 'n':
			changed = true
			continue
		case m.name == "objectversion":
			if c := canonicalVersion(m); c != nil && !bytes.Equal(c, v) {
				v, changed = c, true
			}
		case m.name == "datacontenttype" && m.kind() == '"' && !hasBase64:
			var s string
			_ = json.Unmarshal(m.value, &s)
			if isDefaultContentType(s) {
				changed = true
				continue
			}
		case m.kind() == 't' || m.kind() == 'f':
			v, changed = strconv.AppendQuote(nil, string(m.value)), true
		case m.kind() == '-' || '0' <= m.kind() && m.kind() <= '9':
			v, changed = strconv.AppendQuote(nil, numberString(string(m.value))), true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, m.name)
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, '}'), changed
}

// canonicalVersion is the canonical spelling of an objectversion: the
// decimal integer, as a JSON number up to 2^53-1 and as a string above.
// Nil when the value is not one seqboxtype.ParseEvent accepts (never here).
func canonicalVersion(m member) []byte {
	text := string(m.value)
	if m.kind() == '"' {
		if json.Unmarshal(m.value, &text) != nil {
			return nil
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		return nil
	}
	if n <= maxSafeInteger {
		return strconv.AppendInt(nil, n, 10)
	}
	return strconv.AppendQuote(nil, strconv.FormatInt(n, 10))
}

// isDefaultContentType reports whether ct says application/json, JSON
// event format's default datacontenttype: no parameter but charset=utf-8.
func isDefaultContentType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != mediaJSON {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// numberString is the CloudEvents canonical string of a JSON number: an
// integer literal keeps its digits (its Integer form, "-0" aside), any
// other spelling becomes its RFC 8785 form (3.0 is "3", 1e2 is "100",
// 2.5 is "2.5"), so that every spelling of one value gives one string.
func numberString(lit string) string {
	digits := strings.TrimPrefix(lit, "-")
	if digits != "" && strings.Trim(digits, "0123456789") == "" {
		if strings.Trim(digits, "0") == "" {
			return "0"
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return lit // out of a double's range: the scanner refused it already
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return lit
	}
	return s
}

// fieldName bounds a member name quoted in an error.
func fieldName(name string) string {
	const limit = 64
	if len(name) <= limit {
		return name
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

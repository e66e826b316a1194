package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/seqbox/seqbox/seqboxtype"
)

// maxSafeInteger is the largest objectversion written as a JSON number
// (2^53-1): larger ones stay strings, as seqboxtype.ParseEvent requires.
const maxSafeInteger = 1<<53 - 1

// BinaryEnvelope builds the structured-mode envelope seqbox stores from a
// CloudEvents HTTP binary-mode request: every ce-* header becomes the
// attribute of that name (percent-decoded, as the HTTP binding requires),
// Content-Type becomes datacontenttype, and the body becomes data.
//
// So that one fact hashes the same whichever mode carried it, an
// objectversion that is a plain decimal integer up to 2^53-1 is written
// as a JSON number, as the structured mode would write it; anything else
// stays a string for seqboxtype.ParseEvent to judge. A JSON body
// (application/json or any +json type) is data as it is, a text body
// (text/*) is data as a string, anything else is data_base64.
//
// Errors are *seqboxtype.InvalidEventError naming the attribute: a header
// given twice, a name that is not a CloudEvents attribute name, a value
// that is not valid UTF-8 or badly percent-encoded, a JSON body that is
// not JSON. The envelope is then validated by seqboxtype.ParseEvent.
//
// The envelope is faithful to the request (datacontenttype, extension
// values as strings); POST /v1/events then writes it, like a structured
// one, in the gateway's canonical form (an objectversion string becomes
// a number, a number or boolean extension a string, a default
// application/json datacontenttype is left out), so that the same fact
// sent in either mode is a duplicate, never a collision.
func BinaryEnvelope(h http.Header, body []byte) ([]byte, error) {
	attrs := map[string]string{}
	for name, values := range h {
		lower := strings.ToLower(name)
		attr, ok := strings.CutPrefix(lower, "ce-")
		if !ok {
			continue
		}
		if !validAttrName(attr) {
			return nil, invalidf(attr, "header %s: a CloudEvents attribute name is 1 to 20 lowercase letters or digits", name)
		}
		if len(values) != 1 {
			return nil, invalidf(attr, "header %s given %d times: an attribute has one value", name, len(values))
		}
		if _, dup := attrs[attr]; dup {
			return nil, invalidf(attr, "header %s given twice", name)
		}
		if attr == "data" || attr == "data_base64" {
			return nil, invalidf(attr, "data travels in the body in binary mode, not in a header")
		}
		v, err := url.PathUnescape(values[0])
		if err != nil {
			return nil, invalidf(attr, "header %s is not validly percent-encoded: %v", name, err)
		}
		if !utf8.ValidString(v) {
			return nil, invalidf(attr, "header %s is not valid UTF-8 once percent-decoded", name)
		}
		attrs[attr] = v
	}
	if _, ok := attrs["specversion"]; !ok {
		return nil, invalidf("specversion", "binary mode requires the ce-specversion header")
	}
	ct := h.Get("Content-Type")
	if len(h.Values("Content-Type")) > 1 {
		return nil, invalidf("datacontenttype", "Content-Type given more than once")
	}
	if ct != "" {
		if !utf8.ValidString(ct) {
			return nil, invalidf("datacontenttype", "Content-Type is not valid UTF-8")
		}
		attrs["datacontenttype"] = ct
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	str := func(s string) []byte {
		buf.Reset()
		_ = enc.Encode(s)
		return bytes.TrimRight(buf.Bytes(), "\n")
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return attrOrder(names[i]) < attrOrder(names[j]) || attrOrder(names[i]) == attrOrder(names[j]) && names[i] < names[j]
	})
	out := make([]byte, 0, len(body)+256)
	out = append(out, '{')
	for i, k := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, str(k)...)
		out = append(out, ':')
		v := attrs[k]
		if k == "objectversion" && plainInteger(v) {
			out = append(out, v...)
			continue
		}
		out = append(out, str(v)...)
	}
	if len(body) > 0 {
		data, err := dataMember(ct, body, str)
		if err != nil {
			return nil, err
		}
		if len(names) > 0 {
			out = append(out, ',')
		}
		out = append(out, data...)
	}
	return append(out, '}'), nil
}

// attrOrder puts the required attributes first, for envelopes people read.
func attrOrder(name string) int {
	switch name {
	case "specversion":
		return 0
	case "id":
		return 1
	case "source":
		return 2
	case "type":
		return 3
	}
	return 4
}

// dataMember renders the body as the envelope's data or data_base64.
func dataMember(ct string, body []byte, str func(string) []byte) ([]byte, error) {
	mt := ""
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return nil, invalidf("datacontenttype", "Content-Type %q: %v", ct, err)
		}
	}
	switch {
	case mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if !json.Valid(body) {
			if mt == "" {
				break // no content type and not JSON: bytes
			}
			return nil, invalidf("data", "the body is not valid JSON, but Content-Type is %s", mt)
		}
		return append([]byte(`"data":`), bytes.TrimSpace(body)...), nil
	case strings.HasPrefix(mt, "text/"):
		if utf8.Valid(body) {
			return append([]byte(`"data":`), str(string(body))...), nil
		}
	}
	return append([]byte(`"data_base64":`), str(base64.StdEncoding.EncodeToString(body))...), nil
}

// plainInteger reports whether s is a decimal integer without sign or
// leading zeros that fits a JSON number exactly (at most 2^53-1).
func plainInteger(s string) bool {
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n <= maxSafeInteger
}

// validAttrName is the CloudEvents rule: lowercase ASCII letters and
// digits, at most 20 characters.
func validAttrName(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func invalidf(field, format string, args ...any) error {
	return &seqboxtype.InvalidEventError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

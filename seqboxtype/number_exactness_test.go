package seqboxtype_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
)

// envWithData is an envelope whose data is the given JSON text.
func envWithData(data string) []byte {
	return []byte(`{"id":"a","source":"s","type":"t","data":` + data + `}`)
}

// requireRefused checks that err is an *InvalidEventError naming field,
// with a reason that contains want.
func requireRefused(t *testing.T, err error, field, want string) {
	t.Helper()
	var ie *seqboxtype.InvalidEventError
	if !errors.As(err, &ie) || !errors.Is(err, seqboxtype.ErrInvalidEvent) {
		t.Fatalf("want an *InvalidEventError naming %s, got %v (%T)", field, err, err)
	}
	if ie.Field != field {
		t.Fatalf("the error names %q, want %q: %v", ie.Field, field, err)
	}
	if !strings.Contains(ie.Reason, want) {
		t.Fatalf("reason %q does not say %q", ie.Reason, want)
	}
	if strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("message %q is not one line", err.Error())
	}
}

// Issue 36, class 9: 12345678901234567891 and 12345678901234567890 were
// one hash (RFC 8785 keeps a double), so the second event was a
// duplicate of the first instead of a collision. A number literal whose
// value the hash cannot hold exactly is refused now, naming its JSON path;
// every spelling of a value the hash holds exactly is still accepted.
func TestParseEventRefusesNumbersTheHashCannotHold(t *testing.T) {
	for _, lit := range []string{
		"25", "25.0", "2.5e1", "250e-1", "0.1", "1e300", "1E+300", "-0", "0.0", "0e10", "-0.0e-5",
		"9007199254740991", "9007199254740992", "-9007199254740992", "18014398509481984",
		"1e21", "1000000000000000000000", "123456789012345680000",
		"333333333.3333333", "4.5", "0.002", "1e-27", "5e-324", "1.7976931348623157e308", "2.2250738585072014e-308",
	} {
		if _, err := seqboxtype.ParseEvent(envWithData(`{"amount":` + lit + `}`)); err != nil {
			t.Errorf("%s: refused a number the hash holds exactly: %v", lit, err)
		}
	}
	for _, tt := range []struct{ data, field, lit string }{
		{`{"amount":12345678901234567891}`, "data.amount", "12345678901234567891"},
		{`{"amount":12345678901234567890}`, "data.amount", "12345678901234567890"},
		{`{"items":[1,2,9007199254740993]}`, "data.items[2]", "9007199254740993"},
		{`[0.1000000000000000055511151231257827]`, "data[0]", "0.1000000000000000055511151231257827"},
		{`{"x":1.00000000000000000001}`, "data.x", "1.00000000000000000001"},
		{`{"x":9.007199254740993e15}`, "data.x", "9.007199254740993e15"},
		{`{"x":0.10000000000000001}`, "data.x", "0.10000000000000001"},
		{`{"x":333333333.33333329}`, "data.x", "333333333.33333329"},
		{`{"x":1e-400}`, "data.x", "1e-400"},
		{`{"x":4.9e-324}`, "data.x", "4.9e-324"},
		{`{"x":-1e-99999999999999999999}`, "data.x", "-1e-99999999999999999999"},
		{`{"x":{"very deep":[{"n":123456789012345678}]}}`, `data.x["very deep"][0].n`, "123456789012345678"},
	} {
		_, err := seqboxtype.ParseEvent(envWithData(tt.data))
		requireRefused(t, err, tt.field, tt.lit)
	}
	// An extension attribute is hashed as a number too.
	_, err := seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","amount":12345678901234567891}`))
	requireRefused(t, err, "amount", "12345678901234567891")
	// objectversion keeps its own, more precise message.
	_, err = seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":9007199254740993}`))
	requireRefused(t, err, "objectversion", "send it as a string")
}

// A literal with a huge exponent is judged without building its value:
// the check costs time in the length of the literal, not in its exponent.
func TestParseEventJudgesHugeExponentsCheaply(t *testing.T) {
	for _, lit := range []string{"1e-999999999", "0e999999999", "-0.0e-999999999999999999999999"} {
		_, err := seqboxtype.ParseEvent(envWithData(lit))
		if lit[0] == '1' {
			requireRefused(t, err, "data", lit)
		} else if err != nil {
			t.Errorf("%s is zero, exactly: %v", lit, err)
		}
	}
}

package seqboxtype_test

import (
	"fmt"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Issue 36, class 8: a partitionkey with CR, LF, DEL or another control
// character was accepted, but the gateway sends it to the agent in the
// Seqbox-Partition-Key header, which cannot hold it, so the event failed
// forever. The identity and ordering keys (id, source, type,
// partitionkey, businesskey) are headers, CLI table cells and shell
// arguments, and refuse C0 controls and DEL, naming the attribute.
func TestParseEventRefusesControlCharactersInKeys(t *testing.T) {
	base := map[string]string{"id": "a", "source": "s", "type": "t", "partitionkey": "k", "businesskey": "b"}
	envelope := func(name, value string) []byte {
		raw := `{"specversion":"1.0"`
		for _, n := range []string{"id", "source", "type", "partitionkey", "businesskey"} {
			v := fmt.Sprintf("%q", base[n])
			if n == name {
				v = value
			}
			raw += fmt.Sprintf(`,%q:%s`, n, v)
		}
		return []byte(raw + `}`)
	}
	for _, name := range []string{"id", "source", "type", "partitionkey", "businesskey"} {
		for _, value := range []string{`"PED\r\nX-Injected: 1"`, `"PED\n1"`, `"PED\r"`, `"PED\t1"`, `"PED\u007f"`, "\"PED\x7f\"", `"\u001b[31mred"`, `"PED\u0001"`} {
			_, err := seqboxtype.ParseEvent(envelope(name, value))
			requireRefused(t, err, name, "control character")
		}
		// Printable text, spaces and characters outside ASCII stay fine,
		// and so do C1 controls' neighbours such as U+00A0.
		for _, value := range []string{`"PED 4821"`, `"pédido/4821"`, `"\u00a0x"`, `"a\"b\\c"`} {
			if _, err := seqboxtype.ParseEvent(envelope(name, value)); err != nil {
				t.Errorf("%s %s: %v", name, value, err)
			}
		}
	}
	// Other attributes and data are not keys: control characters there
	// are text like any other.
	for _, raw := range []string{
		`{"id":"a","source":"s","type":"t","tenantid":"x\ty","data":"line 1\nline 2\u007f"}`,
		`{"id":"a","source":"s","type":"t","causationid":"x\ny","dataschema":"a\tb"}`,
	} {
		if _, err := seqboxtype.ParseEvent([]byte(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

package serve

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 36, classes 8 and 9: input the gateway could queue but never
// handle faithfully is a 400 problem naming the field, in structured,
// batch and binary mode, before anything is queued:
//
//   - a number the payload hash cannot hold exactly (12345678901234567891
//     hashed as 12345678901234567000, so …890 and …891 were a duplicate,
//     not a collision), named by its JSON path;
//   - a control character in a key the agent call sends as a header
//     (Seqbox-Partition-Key), which made every dispatch of the event fail.
func TestIngestRefusesUnsendableInput(t *testing.T) {
	r := start(t, Options{})
	const head = `{"specversion":"1.0","id":"a","source":"crm","type":"order.updated"`
	for _, c := range []struct{ name, body, field string }{
		{"integer above 2^53 in data", head + `,"data":{"amount":12345678901234567891}}`, "data.amount"},
		{"the other integer of the pair", head + `,"data":{"amount":12345678901234567890}}`, "data.amount"},
		{"inexact number in an array", head + `,"data":{"items":[1,2,9007199254740993]}}`, "data.items[2]"},
		{"more digits than a double", head + `,"data":{"rate":0.1000000000000000055511151231257827}}`, "data.rate"},
		{"number extension above 2^53", head + `,"amount":12345678901234567891}`, "amount"},
		{"CR LF in partitionkey", head + `,"partitionkey":"PED\r\nX-Injected: 1"}`, "partitionkey"},
		{"LF in partitionkey", head + `,"partitionkey":"PED\n1"}`, "partitionkey"},
		{"DEL in partitionkey", head + ",\"partitionkey\":\"PED\x7f\"}", "partitionkey"},
		{"escape in businesskey", head + `,"businesskey":"\u001b[2J"}`, "businesskey"},
		{"tab in id", `{"specversion":"1.0","id":"a\tb","source":"crm","type":"t"}`, "id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []struct{ ct, body string }{{mediaStructured, c.body}, {mediaBatch, "[" + c.body + "]"}} {
				code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mode.ct}, mode.body)
				require.Equal(t, http.StatusBadRequest, code, "%s: %v", mode.ct, body)
				require.Equal(t, c.field, body["field"], "%s: %v", mode.ct, body)
				require.Equal(t, ProblemInvalidEvent, body["type"])
			}
		})
	}
	binary := func(extra ...string) map[string]string {
		h := map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "b", "Ce-Source": "crm", "Ce-Type": "order.updated"}
		for k := 0; k+1 < len(extra); k += 2 {
			h[extra[k]] = extra[k+1]
		}
		return h
	}
	for _, c := range []struct {
		name    string
		headers map[string]string
		body    string
		field   string
	}{
		{"binary: CR LF in partitionkey", binary("Ce-Partitionkey", "PED%0D%0A1"), ``, "partitionkey"},
		{"binary: DEL in partitionkey", binary("Ce-Partitionkey", "PED%7F"), ``, "partitionkey"},
		{"binary: control character in source", binary("Ce-Source", "crm%01"), ``, "source"},
		{"binary: inexact number in the JSON body", binary("Content-Type", "application/json"), `{"amount":12345678901234567891}`, "data.amount"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, _ := r.call(t, "POST", "/v1/events", "", c.headers, c.body)
			require.Equal(t, http.StatusBadRequest, code, "%v", body)
			require.Equal(t, c.field, body["field"], "%v", body)
			require.Equal(t, ProblemInvalidEvent, body["type"])
		})
	}
	ready, leased, err := r.queue.Depth(t.Context())
	require.NoError(t, err)
	require.Zero(t, ready+leased, "nothing may be queued")

	// Every spelling of a number the hash holds exactly still goes
	// through, and a partitionkey of printable text outside ASCII too.
	for i, data := range []string{`{"amount":25}`, `{"amount":25.0}`, `{"amount":2.5e1}`, `{"rate":0.1}`, `{"big":1e300}`, `{"n":9007199254740992}`} {
		r.post(t, `{"specversion":"1.0","id":"ok`+itoa(int64(i))+`","source":"crm","type":"t","partitionkey":"pédido 4821","data":`+data+`}`)
	}
	eventually(t, "6 effects", func() bool { return r.effects(t) == 6 })
}

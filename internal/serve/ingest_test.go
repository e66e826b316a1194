package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func ev(id, key string, version int, data string) string {
	s := `{"specversion":"1.0","id":"` + id + `","source":"crm","type":"order.updated"`
	if key != "" {
		s += `,"partitionkey":"` + key + `","objectversion":` + itoa(int64(version))
	}
	if data != "" {
		s += `,"data":` + data
	}
	return s + "}"
}

// Structured, binary and batch requests are answered 202 and applied by
// the consumer; the same request sent again applies nothing more.
func TestIngestModesApplyOnce(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			r.post(t, ev("s1", "K", 1, `{"n":1}`))
			code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{
				"Ce-Specversion": "1.0", "Ce-Id": "b1", "Ce-Source": "crm", "Ce-Type": "order.updated",
				"Ce-Partitionkey": "K", "Ce-Objectversion": "2", "Content-Type": "application/json"}, `{"n":2}`)
			require.Equal(t, http.StatusAccepted, code, "%v", body)
			batch := "[" + ev("m1", "K", 3, "") + "," + ev("m2", "L", 1, "") + "]"
			code, body, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
			require.Equal(t, http.StatusAccepted, code, "%v", body)
			require.EqualValues(t, 2, body["accepted"])
			require.Len(t, list(t, body, "events"), 2)
			eventually(t, "4 effects", func() bool { return r.effects(t) == 4 })

			// A client retry of the same requests: 202 again, nothing applied twice.
			r.post(t, ev("s1", "K", 1, `{"n":1}`))
			code, _, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
			require.Equal(t, http.StatusAccepted, code)
			eventually(t, "the retries settled", func() bool {
				return r.metricValue(t, `seqbox_deliveries_total{consumer="gateway",outcome="duplicate"}`) == 3
			})
			require.EqualValues(t, 4, r.effects(t))
		})
	}
}

// Bad input is refused before anything is queued, with a problem body that
// names the field.
func TestIngestRefusesBadInputNamingTheField(t *testing.T) {
	r := start(t, Options{MaxBody: 4096, MaxBatch: 2})
	structured := map[string]string{"Content-Type": mediaStructured}
	for _, c := range []struct {
		name, body, field string
		headers           map[string]string
		code              int
	}{
		{"objectversion not an integer", `{"specversion":"1.0","id":"a","source":"s","type":"t","partitionkey":"K","objectversion":"x"}`, "objectversion", structured, 400},
		{"missing source", `{"specversion":"1.0","id":"a","type":"t"}`, "source", structured, 400},
		{"bad JSON", `{"specversion":"1.0","id":`, "envelope", structured, 400},
		{"duplicate member", `{"specversion":"1.0","id":"a","id":"b","source":"s","type":"t"}`, "id", structured, 400},
		{"empty body", ``, "envelope", structured, 400},
		{"body too large", `{"data":"` + strings.Repeat("x", 5000) + `"}`, "body", structured, 413},
		{"batch too large", "[" + ev("a", "", 0, "") + "," + ev("b", "", 0, "") + "," + ev("c", "", 0, "") + "]", "batch", map[string]string{"Content-Type": mediaBatch}, 413},
		{"batch not an array", `{"id":"a"}`, "batch", map[string]string{"Content-Type": mediaBatch}, 400},
		{"batch with one bad event", "[" + ev("a", "", 0, "") + `,{"specversion":"1.0","id":"b","source":"s"}]`, "type", map[string]string{"Content-Type": mediaBatch}, 400},
		{"binary bad version", ``, "objectversion", map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "a", "Ce-Source": "s", "Ce-Type": "t", "Ce-Partitionkey": "K", "Ce-Objectversion": "1.5"}, 400},
		{"binary without specversion", `{}`, "specversion", map[string]string{"Ce-Id": "a", "Ce-Source": "s", "Ce-Type": "t", "Content-Type": "application/json"}, 400},
		{"binary JSON body not JSON", `{nope`, "data", map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "a", "Ce-Source": "s", "Ce-Type": "t", "Content-Type": "application/json"}, 400},
		{"unsupported media type", `<xml/>`, "Content-Type", map[string]string{"Content-Type": "application/xml"}, 415},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, h := r.call(t, "POST", "/v1/events", "", c.headers, c.body)
			require.Equal(t, c.code, code, "%v", body)
			require.Equal(t, "application/problem+json", h.Get("Content-Type"))
			require.Equal(t, c.field, body["field"], "%v", body)
			for _, m := range []string{"type", "title", "status", "detail"} {
				require.NotEmpty(t, body[m], "problem member %s in %v", m, body)
			}
		})
	}
	ready, leased, err := r.queue.Depth(t.Context())
	require.NoError(t, err)
	require.Zero(t, ready+leased, "nothing may be queued")
	require.Zero(t, r.metricValue(t, `seqbox_deliveries_total{consumer="gateway",outcome="rejected"}`))
}

// With --ingest-token, ingest needs it.
func TestIngestToken(t *testing.T) {
	r := start(t, Options{IngestToken: "ingest-secret-123456"})
	h := map[string]string{"Content-Type": mediaStructured}
	code, body, _ := r.call(t, "POST", "/v1/events", "", h, ev("a", "", 0, ""))
	require.Equal(t, http.StatusUnauthorized, code, "%v", body)
	code, _, _ = r.call(t, "POST", "/v1/events", "wrong-secret-123456", h, ev("a", "", 0, ""))
	require.Equal(t, http.StatusUnauthorized, code)
	code, _, _ = r.call(t, "POST", "/v1/events", "ingest-secret-123456", h, ev("a", "", 0, ""))
	require.Equal(t, http.StatusAccepted, code)
	eventually(t, "applied", func() bool { return r.effects(t) == 1 })
}

package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
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

			// A client retry of the same requests: 200 duplicate, nothing
			// queued or applied twice.
			require.Equal(t, "duplicate", r.postWant(t, ev("s1", "K", 1, `{"n":1}`), http.StatusOK)["status"])
			code, body, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, []any{"duplicate", 0.0, 2.0}, []any{body["status"], body["accepted"], body["duplicates"]})
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

// A request without a Content-Type, or with one a cross-site page can make
// a browser send without a CORS preflight, is refused with 415 naming the
// header, and nothing is queued: with no ingest token, a web page would
// otherwise inject events. Every documented request still works.
func TestIngestRefusesMissingOrUndocumentedContentType(t *testing.T) {
	r := start(t, Options{})
	for _, ct := range []string{"", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		t.Run("refused "+ct, func(t *testing.T) {
			h := map[string]string{}
			if ct != "" {
				h["Content-Type"] = ct
			}
			code, body, hdr := r.call(t, "POST", "/v1/events", "", h, ev("csrf", "K", 1, `{"n":1}`))
			require.Equal(t, http.StatusUnsupportedMediaType, code, "%v", body)
			require.Equal(t, "application/problem+json", hdr.Get("Content-Type"))
			require.Equal(t, "Content-Type", body["field"])
			require.Equal(t, ProblemUnsupported, body["type"])
			require.Contains(t, body["detail"], "Content-Type header")
		})
	}
	ready, leased, err := r.queue.Depth(t.Context())
	require.NoError(t, err)
	require.Zero(t, ready+leased, "nothing may be queued")

	binary := func(id string) map[string]string {
		return map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": "crm", "Ce-Type": "t"}
	}
	withCT := func(h map[string]string, ct string) map[string]string { h["Content-Type"] = ct; return h }
	for _, c := range []struct {
		name    string
		headers map[string]string
		body    string
	}{
		{"structured", map[string]string{"Content-Type": mediaStructured}, ev("ok1", "", 0, "")},
		{"structured with charset", map[string]string{"Content-Type": mediaStructured + "; charset=utf-8"}, ev("ok2", "", 0, "")},
		{"plain JSON envelope", map[string]string{"Content-Type": "application/json"}, ev("ok3", "", 0, "")},
		{"batch", map[string]string{"Content-Type": mediaBatch}, "[" + ev("ok4", "", 0, "") + "]"},
		{"binary without body nor Content-Type", binary("ok5"), ""},
		{"binary JSON", withCT(binary("ok6"), "application/json"), `{"n":1}`},
		{"binary text", withCT(binary("ok7"), "text/plain"), "hello"},
		{"binary bytes", withCT(binary("ok8"), "application/octet-stream"), "\x00\x01"},
		{"binary by ce-id alone is binary, and says what is missing", map[string]string{"Ce-Id": "x", "Ce-Source": "crm", "Ce-Type": "t"}, ""},
	} {
		t.Run("accepted "+c.name, func(t *testing.T) {
			code, body, _ := r.call(t, "POST", "/v1/events", "", c.headers, c.body)
			if c.headers["Ce-Specversion"] == "" && c.headers["Ce-Id"] != "" {
				require.Equal(t, http.StatusBadRequest, code, "%v", body)
				require.Equal(t, "specversion", body["field"])
				return
			}
			require.Equal(t, http.StatusAccepted, code, "%v", body)
		})
	}
	eventually(t, "8 effects", func() bool { return r.effects(t) == 8 })
}

// Structured mode is held to the CloudEvents rules binary mode already
// follows: each violation is a 400 naming the field, and nothing is
// queued.
func TestIngestStructuredFollowsCloudEventsRules(t *testing.T) {
	r := start(t, Options{})
	const head = `{"specversion":"1.0","id":"a","source":"s","type":"t"`
	for _, c := range []struct{ name, body, field string }{
		{"missing specversion", `{"id":"a","source":"s","type":"t"}`, "specversion"},
		{"null specversion", `{"specversion":null,"id":"a","source":"s","type":"t"}`, "specversion"},
		{"data and data_base64", head + `,"data":{"n":1},"data_base64":"AAE="}`, "data_base64"},
		{"invalid base64", head + `,"data_base64":"not base64!"}`, "data_base64"},
		{"base64 without padding", head + `,"data_base64":"AAE"}`, "data_base64"},
		{"base64 with stray bits", head + `,"data_base64":"AAF="}`, "data_base64"},
		{"base64 not a string", head + `,"data_base64":12}`, "data_base64"},
		{"upper-case attribute name", head + `,"tenantId":"x"}`, "tenantId"},
		{"attribute name with a dash", head + `,"trace-id":"x"}`, "trace-id"},
		{"attribute name over 20 characters", head + `,"abcdefghijklmnopqrstu":"x"}`, "abcdefghijklmnopqrstu"},
		{"object-valued extension", head + `,"meta":{"a":1}}`, "meta"},
		{"array-valued extension", head + `,"tags":["a"]}`, "tags"},
		{"object-valued subject", head + `,"subject":{}}`, "subject"},
		{"empty attribute name", head + `,"":null}`, "envelope"},
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
	ready, leased, err := r.queue.Depth(t.Context())
	require.NoError(t, err)
	require.Zero(t, ready+leased, "nothing may be queued")

	// What the rules allow still goes through.
	for i, body := range []string{
		head + `,"data_base64":"AAE="}`,
		head + `,"data":null}`,
		head + `,"priority":3,"urgent":true,"note":null,"x20abcdefghijklmnopq":"ok"}`,
		head + `,"datacontenttype":"text/plain","data":"hi"}`,
	} {
		body = strings.Replace(body, `"id":"a"`, `"id":"ok`+itoa(int64(i))+`"`, 1)
		code, m, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured}, body)
		require.Equal(t, http.StatusAccepted, code, "%s: %v", body, m)
	}
	eventually(t, "4 effects", func() bool { return r.effects(t) == 4 })
}

// One fact sent once in structured mode and once in binary mode is a
// duplicate, never a collision: a string objectversion against its
// header, a number or boolean extension against its header, data without
// datacontenttype against Content-Type: application/json.
func TestIngestSameFactStructuredAndBinaryIsDuplicate(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			cases := []struct {
				name, structured string
				binary           map[string]string
				data             string
			}{
				{"string objectversion",
					`{"specversion":"1.0","id":"v1","source":"crm","type":"t","partitionkey":"V","objectversion":"5","datacontenttype":"application/json","data":{"n":1}}`,
					map[string]string{"Ce-Partitionkey": "V", "Ce-Objectversion": "5", "Content-Type": "application/json"}, `{"n":1}`},
				{"number and boolean extensions",
					`{"specversion":"1.0","id":"x1","source":"crm","type":"t","priority":3,"ratio":2.50,"urgent":true,"datacontenttype":"application/json","data":{"n":1}}`,
					map[string]string{"Ce-Priority": "3", "Ce-Ratio": "2.5", "Ce-Urgent": "true", "Content-Type": "application/json"}, `{"n":1}`},
				{"default datacontenttype",
					`{"specversion":"1.0","id":"d1","source":"crm","type":"t","data":{"n":1}}`,
					map[string]string{"Content-Type": "application/json; charset=utf-8"}, `{"n":1}`},
				{"no data, null attribute",
					`{"specversion":"1.0","id":"n1","source":"crm","type":"t","subject":null}`,
					map[string]string{}, ``},
			}
			for _, c := range cases {
				r.post(t, c.structured)
				h := map[string]string{"Ce-Specversion": "1.0", "Ce-Source": "crm", "Ce-Type": "t"}
				for k, v := range c.binary {
					h[k] = v
				}
				var id struct {
					ID string `json:"id"`
				}
				require.NoError(t, json.Unmarshal([]byte(c.structured), &id))
				h["Ce-Id"] = id.ID
				code, body, _ := r.call(t, "POST", "/v1/events", "", h, c.data)
				require.Equal(t, http.StatusOK, code, "%s: %v", c.name, body)
				require.Equal(t, "duplicate", body["status"], "%s: the same fact in binary mode is a duplicate", c.name)
			}
			duplicates := `seqbox_deliveries_total{consumer="gateway",outcome="duplicate"}`
			collisions := `seqbox_deliveries_total{consumer="gateway",outcome="collision"}`
			eventually(t, "every second copy decided", func() bool {
				return r.metricValue(t, duplicates)+r.metricValue(t, collisions) == float64(len(cases))
			})
			require.Empty(t, list(t, r.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions"))
			require.EqualValues(t, len(cases), r.metricValue(t, duplicates))
			eventually(t, "every first copy applied", func() bool { return r.effects(t) == int64(len(cases)) })
		})
	}
}

// The canonical form is what both modes produce for one fact, whatever
// the spelling, and leaves alone what is already canonical.
func TestCanonicalEnvelope(t *testing.T) {
	hash := func(raw string) string {
		t.Helper()
		ev, canon, err := ingestEvent([]byte(raw))
		require.NoError(t, err, raw)
		again, _, err := ingestEvent(canon)
		require.NoError(t, err, "%s", canon)
		require.Equal(t, ev.Hash, again.Hash, "canonical twice: %s", canon)
		return ev.Hash
	}
	const head = `{"specversion":"1.0","id":"e","source":"s","type":"t","partitionkey":"K"`
	for _, same := range [][]string{
		{head + `,"objectversion":5}`, head + `,"objectversion":"5"}`, head + `,"objectversion":"05"}`},
		{head + `,"objectversion":"9007199254740993"}`, head + `,"objectversion":"09007199254740993"}`},
		{head + `,"n":3}`, head + `,"n":"3"}`, head + `,"n":3.0}`, head + `,"n":0.3e1}`},
		{head + `,"n":-0}`, head + `,"n":"0"}`, head + `,"n":0}`},
		{head + `,"b":false}`, head + `,"b":"false"}`},
		{head + `,"data":[1]}`, head + `,"datacontenttype":"application/json","data":[1]}`, head + `,"datacontenttype":"Application/JSON; charset=UTF-8","data":[1]}`},
		{head + `}`, head + `,"datacontenttype":"application/json"}`, head + `,"subject":null,"objectversion":null}`},
	} {
		want := hash(same[0])
		for _, s := range same[1:] {
			require.Equal(t, want, hash(s), "%s\nvs %s", same[0], s)
		}
	}
	for _, differ := range [][2]string{
		{head + `,"objectversion":"9007199254740993"}`, head + `,"objectversion":"9007199254740992"}`},
		{head + `,"data":"x"}`, head + `,"datacontenttype":"text/plain","data":"x"}`},
		{head + `,"datacontenttype":"application/json; charset=latin1","data":[1]}`, head + `,"data":[1]}`},
		{head + `,"datacontenttype":"application/json","data_base64":"AAE="}`, head + `,"data_base64":"AAE="}`},
	} {
		require.NotEqual(t, hash(differ[0]), hash(differ[1]), "%s\nvs %s", differ[0], differ[1])
	}
	raw := head + `, "objectversion" : 7 ,"data":{"b": 2.50,"a":"\u00e9"}}`
	_, canon, err := ingestEvent([]byte(raw))
	require.NoError(t, err)
	require.Equal(t, raw, string(canon), "an envelope already canonical is queued exactly as received")
	_, canon, err = ingestEvent([]byte(head + `,"objectversion":"7","data":{"b": 2.50,"a":"\u00e9"}}`))
	require.NoError(t, err)
	require.Equal(t, head+`,"objectversion":7,"data":{"b": 2.50,"a":"\u00e9"}}`, string(canon), "data is kept byte for byte")
}

// FuzzIngestEvent feeds arbitrary envelopes to the gateway's validation:
// it never panics, every error names a field, and what it accepts it
// returns in a canonical form that is a fixed point with the same hash
// and identity.
func FuzzIngestEvent(f *testing.F) {
	for _, s := range []string{
		ev("a", "K", 1, `{"n":1}`),
		`{"specversion":"1.0","id":"a","source":"s","type":"t","partitionkey":"K","objectversion":"05","n":3.50,"b":true,"z":null}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"t","datacontenttype":"application/json; charset=UTF-8","data":null}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"t","datacontenttype":"application/json","data_base64":"AAE="}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"t","Bad":1,"data":{"a":[1,2]}}`,
		`{"id":"a","source":"s","type":"t","n":-0,"m":1e2}`,
		`{"00000000000":"000","id":"0","source":"0","type":"0","":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, canon, err := ingestEvent(raw)
		if err != nil {
			var ie *seqboxtype.InvalidEventError
			if !errors.As(err, &ie) || ie.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		again, canon2, err := ingestEvent(canon)
		if err != nil {
			t.Fatalf("the canonical form %q of %q is refused: %v", canon, raw, err)
		}
		if string(canon2) != string(canon) || again.Hash != ev.Hash || again.ID != ev.ID || again.Source != ev.Source {
			t.Fatalf("not a fixed point: %q -> %q -> %q", raw, canon, canon2)
		}
	})
}

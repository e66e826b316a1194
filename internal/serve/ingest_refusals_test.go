package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// An event of exactly the one-event limit (seqboxtype.MaxEventSize) is
// taken and applied; one byte more is refused with 413 naming the
// envelope, and nothing of it is queued. (The bound was tested only far
// above it: refusing the limit itself went through every test.)
func TestIngestTakesAnEventOfExactlyItsLimit(t *testing.T) {
	r := start(t, Options{})
	sized := func(id string, n int) string {
		e := ev(id, "", 0, `""`)
		return ev(id, "", 0, `"`+strings.Repeat("x", n-len(e))+`"`)
	}
	atLimit := sized("at-limit", seqboxtype.MaxEventSize)
	require.Len(t, atLimit, seqboxtype.MaxEventSize)
	r.postWant(t, atLimit, http.StatusAccepted)
	eventually(t, "the event at the limit applied", func() bool { return r.effects(t) == 1 })

	over := sized("over", seqboxtype.MaxEventSize+1)
	body := r.postWant(t, over, http.StatusRequestEntityTooLarge)
	require.Equal(t, ProblemTooLarge, body["type"])
	require.Equal(t, "envelope", body["field"])
	require.Contains(t, body["detail"], "1048577 bytes, larger than the 1048576-byte limit of one event")
	require.Equal(t, "duplicate", r.postWant(t, atLimit, http.StatusOK)["status"], "the one taken is known; the refused one was never queued")
	r.postWant(t, sized("over", 100), http.StatusAccepted) // its id is free: nothing of the refused one was kept
	eventually(t, "two applied", func() bool { return r.effects(t) == 2 })
}

// A refused batch names every bad event, by its position, and says that
// none was queued; a refused single event has no positions to name.
// (With the two swapped, every test of the package passed.)
func TestIngestRefusalNamesEachBadEventOfABatch(t *testing.T) {
	r := start(t, Options{})
	bad := `{"specversion":"1.0","id":"b","source":"s"}` // no type
	batch := "[" + ev("a", "", 0, "") + "," + bad + "," + `{"specversion":"1.0","id":"c","type":"t"}` + "]"
	code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
	require.Equal(t, http.StatusBadRequest, code, "%v", body)
	require.EqualValues(t, 1, body["index"], "%v", body)
	require.Equal(t, "type", body["field"])
	errs := list(t, body, "errors")
	require.Len(t, errs, 2)
	for i, want := range []struct {
		index float64
		field string
	}{{1, "type"}, {2, "source"}} {
		e := errs[i]
		require.Equal(t, want.index, e["index"], "%v", e)
		require.Equal(t, want.field, e["field"], "%v", e)
		require.NotEmpty(t, e["detail"])
	}
	require.Contains(t, body["detail"], "2 of 3 events are invalid, so none was queued (a batch is all or nothing); first: event 1: type: ")

	code, body, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured}, bad)
	require.Equal(t, http.StatusBadRequest, code, "%v", body)
	require.Equal(t, "type", body["field"])
	require.NotContains(t, body, "index")
	require.NotContains(t, body, "errors")
	require.True(t, strings.HasPrefix(body["detail"].(string), "type: "), "%v", body["detail"])

	ready, leased, err := r.queue.Depth(t.Context())
	require.NoError(t, err)
	require.Zero(t, ready+leased, "nothing of a refused request is queued")
}

// A compressed body is refused naming its Content-Encoding (415), in every
// mode, and nothing of it is queued: before, gzip bytes were read as the
// envelope ("invalid character '\x1f'") and, in binary mode, kept as the
// event's data; br was ignored the same way. identity is no encoding.
func TestIngestRefusesACompressedBody(t *testing.T) {
	r := start(t, Options{})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, err := w.Write([]byte(ev("zipped", "", 0, "")))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	binary := map[string]string{"ce-specversion": "1.0", "ce-id": "zipped-bin", "ce-source": "s", "ce-type": "t", "Content-Type": "text/plain"}
	for _, c := range []struct {
		encoding string
		headers  map[string]string
	}{
		{"gzip", map[string]string{"Content-Type": mediaStructured}},
		{"br", map[string]string{"Content-Type": mediaStructured}},
		{"gzip", map[string]string{"Content-Type": mediaBatch}},
		{"gzip", binary},
		{"identity, gzip", binary},
	} {
		h := map[string]string{"Content-Encoding": c.encoding}
		for k, v := range c.headers {
			h[k] = v
		}
		code, body, _ := r.call(t, "POST", "/v1/events", "", h, gz.String())
		require.Equal(t, http.StatusUnsupportedMediaType, code, "%s: %v", c.encoding, body)
		require.Equal(t, "Content-Encoding", body["field"], "%v", body)
		require.Contains(t, body["detail"], "Content-Encoding "+c.encoding+": seqbox takes uncompressed bodies only", "%v", body)
	}
	code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured, "Content-Encoding": "identity"}, ev("plain", "", 0, ""))
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	eventually(t, "the uncompressed one applied", func() bool { return r.effects(t) == 1 })
	ready, leased, err := r.queue.Depth(t.Context())
	require.NoError(t, err)
	require.Zero(t, ready+leased, "nothing of a refused request is queued")
}

// A request whose Content-Length is above --max-body is refused with 413
// as soon as its headers are read: before, the server read --max-body
// bytes of it first (and waited for them when the client sent them
// slowly).
func TestIngestRefusesADeclaredOversizeBodyBeforeReadingIt(t *testing.T) {
	r := start(t, Options{MaxBody: 4096})
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	// Only the headers and a few bytes go: a server that reads the body
	// first waits for the rest, and the deadline (a guard against a hang,
	// not a measure) ends the test.
	_, err = fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 10000000\r\n\r\n{\"specversion\"", mediaStructured)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer before the body came")
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(raw), "Content-Length 10000000 is larger than the 4096-byte limit (--max-body); nothing was queued")
}

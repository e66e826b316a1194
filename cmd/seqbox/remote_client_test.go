package main

// The --server client against gateways that misbehave, on loopback: it
// follows no redirect (the admin token reaches the --server origin only),
// reads a bounded answer, and refuses an answer of another shape instead
// of reading it as an empty list.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/seqbox/seqbox/internal/cli"
	"github.com/stretchr/testify/require"
)

// recorder is a server that answers every admin call as a gateway with
// nothing stuck would, and records what reached it.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string // method and path of each request
	auth  []string // the Authorization headers received
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.calls = append(rec.calls, r.Method+" "+r.URL.Path)
		if a := r.Header.Get("Authorization"); a != "" {
			rec.auth = append(rec.auth, a)
		}
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost:
			_, _ = io.WriteString(w, `{"request":1,"action":"redrive","target":"1","state":"done","decisions":[]}`)
		case strings.HasPrefix(r.URL.Path, "/v1/admin/dlq"):
			_, _ = io.WriteString(w, `{"consumer":"gateway","dead_letters":[]}`)
		case strings.HasPrefix(r.URL.Path, "/v1/admin/keys"):
			_, _ = io.WriteString(w, `{"consumer":"gateway","keys":[]}`)
		default:
			_, _ = io.WriteString(w, `{"consumer":"gateway"}`)
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) seen() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), append([]string(nil), r.auth...)
}

// A gateway that answers 3xx, to another origin or to itself, is an
// error naming the status and the Location; nothing reaches the target
// of the redirect, the admin token least of all.
func TestRemoteNeverFollowsRedirects(t *testing.T) {
	t.Parallel()
	other := newRecorder(t)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			var mu sync.Mutex
			here := 0 // requests the redirecting gateway received
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				here++
				mu.Unlock()
				if strings.HasSuffix(r.URL.Path, "/here") {
					http.Redirect(w, r, "/elsewhere", code) // the same origin: not followed either
					return
				}
				http.Redirect(w, r, other.URL+r.URL.RequestURI(), code)
			}))
			defer gw.Close()
			status := strconv.Itoa(code) + " " + http.StatusText(code)
			advice := "; redirects are not followed, so that the admin token goes to --server only: give --server the gateway's own URL"
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"dlq", "list"}, "seqbox: dlq list: the gateway at " + gw.URL + " answered " + status +
					" with Location " + other.URL + "/v1/admin/dlq?limit=1000" + advice},
				{[]string{"keys", "list", "--all"}, "seqbox: keys list: the gateway at " + gw.URL + " answered " + status +
					" with Location " + other.URL + "/v1/admin/keys?all=true" + advice},
				{[]string{"keys", "show", "here"}, `seqbox: keys show: key "here": the gateway at ` + gw.URL + " answered " + status +
					" with Location " + gw.URL + "/elsewhere" + advice},
				{[]string{"dlq", "show", "1", "--consumer", "gateway"}, "seqbox: dlq show: the gateway at " + gw.URL + " answered " + status +
					" with Location " + other.URL + "/v1/admin/overview" + advice},
				{[]string{"dlq", "redrive", "--output", "jsonl", "1", "--by", "bob", "--reason", "fixed"}, "seqbox: dlq redrive: the gateway at " + gw.URL + " answered " + status +
					" with Location " + other.URL + "/v1/admin/dlq/1/redrive" + advice},
			} {
				require.Equal(t, c.want, fails(t, append(c.args, "--server", gw.URL, "--admin-token", serveToken)...))
			}
			mu.Lock()
			require.Equal(t, 5, here, "one request per command, none after the redirect")
			mu.Unlock()
		})
	}
	calls, auth := other.seen()
	require.Empty(t, calls, "no request crossed to the other origin")
	require.Empty(t, auth, "no admin token crossed to the other origin")
}

// fakeGateway answers each path with a fixed body.
func fakeGateway(t *testing.T, bodies map[string]string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// An answer that is not the admin API's shape is an error naming what was
// expected: {} or null is not an empty list.
func TestRemoteRefusesAnswersOfAnotherShape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		path string // method and path answered with body
		body string
		want string // after "the answer of URL to PATH "
	}{
		{"dlq list {}", []string{"dlq", "list"}, "GET /v1/admin/dlq", `{}`,
			`is not the admin API's: want a JSON object with a "dead_letters" array, got an object without "dead_letters"`},
		{"dlq list null list", []string{"dlq", "list"}, "GET /v1/admin/dlq", `{"consumer":"gateway","dead_letters":null}`,
			`is not the admin API's: want a JSON object with a "dead_letters" array, got "dead_letters" as null`},
		{"dlq list array", []string{"dlq", "list", "--json"}, "GET /v1/admin/dlq", `[]`,
			`is not the admin API's: want a JSON object with a "dead_letters" array, got an array`},
		{"dlq list null", []string{"dlq", "list"}, "GET /v1/admin/dlq", `null`,
			`is not the admin API's: want a JSON object with a "dead_letters" array, got null`},
		{"dlq list not JSON", []string{"dlq", "list"}, "GET /v1/admin/dlq", `<html>`,
			`is not the admin API's: invalid character '<' looking for beginning of value`},
		{"keys list {}", []string{"keys", "list"}, "GET /v1/admin/keys", `{}`,
			`is not the admin API's: want a JSON object with a "keys" array, got an object without "keys"`},
		{"keys list object", []string{"keys", "list", "--json"}, "GET /v1/admin/keys", `{"consumer":"gateway","keys":{}}`,
			`is not the admin API's: want a JSON object with a "keys" array, got "keys" as an object`},
		{"keys show {}", []string{"keys", "show", "K"}, "GET /v1/admin/keys/K", `{}`,
			`is not the admin API's: want a JSON object with "parked", "gaps" and "audit" arrays, got an object without "parked"`},
		{"dlq show null", []string{"dlq", "show", "1"}, "GET /v1/admin/dlq/1", `null`,
			`is not the admin API's: want a JSON object, got null`},
		{"dlq show another object", []string{"dlq", "show", "1"}, "GET /v1/admin/dlq/1", `{"hello":"world"}`,
			`is not the admin API's: want dead letter 1, got one numbered 0`},
		{"dlq show another row", []string{"dlq", "show", "-o", "json", "1"}, "GET /v1/admin/dlq/1", `{"seq":2,"state":"open"}`,
			`is not the admin API's: want dead letter 1, got one numbered 2`},
		{"redrive {}", []string{"dlq", "redrive", "--output", "jsonl", "1"}, "POST /v1/admin/dlq/1/redrive", `{}`,
			`is not the admin API's: want a JSON object with a "decisions" array, got an object without "decisions"`},
		{"redrive null decisions", []string{"dlq", "redrive", "--output", "jsonl", "1"}, "POST /v1/admin/dlq/1/redrive", `{"request":1,"state":"done","decisions":null}`,
			`is not the admin API's: want a JSON object with a "decisions" array, got "decisions" as null`},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw := fakeGateway(t, map[string]string{c.path: c.body})
			method, path, _ := strings.Cut(c.path, " ")
			switch {
			case c.args[0] == "dlq" && c.args[1] == "list":
				path += "?limit=1000" // it reads a page at a time
			case c.args[0] == "keys" && c.args[1] == "show":
				path += "?parked_limit=100" // a page of the key's parked messages
			}
			line := fails(t, append(c.args, "--server", gw.URL, "--admin-token", serveToken)...)
			require.Equal(t, "seqbox: "+c.args[0]+" "+c.args[1]+": the answer of "+gw.URL+" to "+method+" "+path+" "+c.want, line)
		})
	}
	// The shapes themselves, empty lists included, are read.
	gw := fakeGateway(t, map[string]string{
		"GET /v1/admin/dlq":  `{"consumer":"gateway","dead_letters":[]}`,
		"GET /v1/admin/keys": `{"consumer":"gateway","keys":[]}`,
	})
	require.Empty(t, ok(t, "dlq", "list", "--json", "--server", gw.URL, "--admin-token", serveToken))
	require.Equal(t, lines(keysHeaderRemote), ok(t, "keys", "list", "--server", gw.URL, "--admin-token", serveToken))
}

// dlq list --server reads the gateway's dead letters a page at a time,
// following next_after to the end, and refuses a next page that would not
// move on (it would ask for the same page forever).
func TestRemoteReadsEveryPageOfDeadLetters(t *testing.T) {
	t.Parallel()
	letter := func(seq int) string {
		return `{"seq":` + strconv.Itoa(seq) + `,"state":"open","source":"s","id":"e` + strconv.Itoa(seq) + `","partitionkey":"k","objectversion":1,"attempts":1,"dead_at":"2026-01-01T00:00:00Z"}`
	}
	pages := func(stuck bool) *httptest.Server {
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch after := r.URL.Query().Get("after"); {
			case r.URL.Query().Get("limit") != "1000":
				http.Error(w, "no limit", http.StatusBadRequest)
			case after == "":
				_, _ = io.WriteString(w, `{"consumer":"gateway","dead_letters":[`+letter(1)+`,`+letter(2)+`],"next_after":2}`)
			case after == "2" && !stuck:
				_, _ = io.WriteString(w, `{"consumer":"gateway","dead_letters":[`+letter(7)+`],"next_after":null}`)
			default:
				_, _ = io.WriteString(w, `{"consumer":"gateway","dead_letters":[`+letter(2)+`],"next_after":2}`)
			}
		}))
		t.Cleanup(gw.Close)
		return gw
	}
	out := ok(t, "dlq", "list", "--output", "json", "--server", pages(false).URL, "--admin-token", serveToken)
	var got []struct{ Seq int64 }
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, []struct{ Seq int64 }{{1}, {2}, {7}}, got, out)
	require.Contains(t, fails(t, "dlq", "list", "--server", pages(true).URL, "--admin-token", serveToken),
		"its page after dead letter 2 named 2 as the next page's start")
}

// An answer larger than the client's bound is an error, whether its size
// is announced or only found out by reading.
func TestRemoteBoundsTheAnswer(t *testing.T) {
	t.Parallel()
	const size = cli.MaxAnswer + 1<<20
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/admin/keys" {
			// Announced: nothing needs to be read.
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.WriteHeader(http.StatusOK)
			return
		}
		// Streamed (chunked): a valid, empty list after 33 MiB of blanks.
		_, _ = io.WriteString(w, `{"consumer":"gateway","dead_letters":[`)
		w.(http.Flusher).Flush()
		blank := bytes.Repeat([]byte(" "), 1<<20)
		for range size >> 20 {
			if _, err := w.Write(blank); err != nil {
				return // the client stopped reading
			}
		}
		_, _ = io.WriteString(w, `]}`)
	}))
	t.Cleanup(gw.Close)
	require.Equal(t, "seqbox: dlq list: the answer of "+gw.URL+" to GET /v1/admin/dlq?limit=1000 is larger than the 32 MiB this client reads: is --server a seqbox serve?",
		fails(t, "dlq", "list", "--server", gw.URL, "--admin-token", serveToken))
	require.Equal(t, "seqbox: keys list: the answer of "+gw.URL+" to GET /v1/admin/keys is "+strconv.Itoa(size)+" bytes, more than the 32 MiB this client reads: is --server a seqbox serve?",
		fails(t, "keys", "list", "--server", gw.URL, "--admin-token", serveToken))
}

// A gateway whose next DLQ page starts where the last one did is refused
// at once, by name: read page after page, the same answer would never
// end.
func TestRemoteRefusesADLQPageThatDoesNotMoveOn(t *testing.T) {
	t.Parallel()
	gw := fakeGateway(t, map[string]string{"GET /v1/admin/dlq": `{"consumer":"gateway","dead_letters":[],"next_after":0}`})
	line := fails(t, "dlq", "list", "--server", gw.URL, "--admin-token", serveToken)
	require.Equal(t, "seqbox: dlq list: the answer of "+gw.URL+" is not the admin API's: its page after dead letter 0 named 0 as the next page's start", line)
}

package effects

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// HTTPRequest builds the request of one attempt; it is called again for
// every attempt, so its body is fresh each time.
type HTTPRequest func(ctx context.Context) (*http.Request, error)

// HTTPRef reads the remote reference from a 2xx response.
type HTTPRef func(resp *http.Response) (string, error)

// HTTP returns a Call that sends the request with the header
// Idempotency-Key set to the ledger's key, through client (nil:
// http.DefaultClient). A 2xx answer succeeds with the reference ref reads.
// A refusal that certainly applied nothing (400–499 but 409; 409 means
// the key is in use by a request still running) is Definite. Anything
// else, a 5xx, a 409, a timeout or a broken connection, may have applied
// the effect, and is uncertain. The request is never sent twice by
// net/http's own retries: only the ledger decides to call again.
func HTTP(client *http.Client, build HTTPRequest, ref HTTPRef) Call {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, key string) (string, error) {
		req, err := build(ctx)
		if err != nil {
			return "", Definite(fmt.Errorf("build request: %w", err))
		}
		req.Header.Set("Idempotency-Key", key)
		noReplay(req)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			r, err := ref(resp)
			if err != nil {
				// Applied remotely, but the answer was unreadable.
				return "", fmt.Errorf("%s %s: %d, unreadable reference: %w", req.Method, req.URL.Redacted(), resp.StatusCode, err)
			}
			return r, nil
		}
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err = fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Redacted(), resp.Status, strings.TrimSpace(string(snippet)))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict {
			return "", Definite(err)
		}
		return "", err
	}
}

// noReplay stops net/http from sending the request again by itself. Its
// Transport retries a request on a broken reused connection when the
// request is replayable, and one with an Idempotency-Key header counts as
// replayable whatever its method. A hidden retry is exactly the blind
// re-execution the ledger forbids: against a remote side that ignores the
// key it creates a second effect. Without GetBody the request cannot be
// replayed; a body-less request gets an empty body for the same reason.
func noReplay(req *http.Request) {
	if req.Body == nil || req.Body == http.NoBody {
		req.Body = io.NopCloser(strings.NewReader(""))
		req.ContentLength = 0
	}
	req.GetBody = nil
}

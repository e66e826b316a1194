package effects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
	"go.opentelemetry.io/otel/propagation"
)

// HTTPRequest builds the request of one attempt; it is called again for
// every attempt, so its body is fresh each time.
type HTTPRequest func(ctx context.Context) (*http.Request, error)

// HTTPRef reads the remote reference from a 2xx response.
type HTTPRef func(resp *http.Response) (string, error)

// HTTP returns a Call that sends the request with the header
// Idempotency-Key set to the ledger's key, through client (nil:
// http.DefaultClient; a copy of it that never follows redirects). A 2xx
// answer succeeds with the reference ref reads. A 3xx is a Definite
// failure naming where it pointed: the request was not delivered, and is
// not sent elsewhere. A refusal that certainly applied nothing (400–499
// but 408, 409 and 429) is Definite. 408 and 429 say the request was not
// processed: NotApplied (failed in the ledger, transient), with their
// Retry-After kept (seqbox.RetryAfter). A request that never left the
// process is not uncertain either (SendOnce). Anything else, a 5xx, a
// 409 (the key is in use by a request still running), a timeout or a
// broken connection after the request went out, may have applied the
// effect, and is uncertain. The request is never sent twice by
// net/http's own retries: only the ledger decides to call again.
func HTTP(client *http.Client, build HTTPRequest, ref HTTPRef) Call {
	if client == nil {
		client = http.DefaultClient
	}
	client = withoutRedirects(client)
	return func(ctx context.Context, key string) (string, error) {
		req, err := build(ctx)
		if err != nil {
			return "", Definite(fmt.Errorf("build request: %w", err))
		}
		req.Header.Set("Idempotency-Key", key)
		// The remote side continues the message's trace (W3C trace context).
		propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
		resp, err := SendOnce(client, req)
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
		return "", classify(resp, err)
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

// ErrNotSent is matched (errors.Is) by SendOnce's error for a request
// that never reached the remote side: no connection was made (refused,
// unreachable, a dial that timed out), so nothing of it took effect.
var ErrNotSent = errors.New("not sent")

// SendOnce sends req through client exactly once (net/http's own retry of
// a broken reused connection is switched off, as in HTTP) and says
// whether a failed request can have reached the remote side. Through a
// client whose Transport is net/http's own (nil included), an error
// before a connection was had is not uncertain: one net/http refused
// before dialling (an invalid header value, an unsupported URL) is
// Definite, since it can never be sent; one where the dial failed or the
// context ended first is NotApplied. Any other error is returned as
// net/http gave it: the request may have gone out. Through another
// Transport nothing is known, and no error is classified.
//
// A request that never reached the remote side (no connection was made)
// fails with an error that matches ErrNotSent.
func SendOnce(client *http.Client, req *http.Request) (*http.Response, error) {
	if client == nil {
		client = http.DefaultClient
	}
	noReplay(req)
	var dialling, connected atomic.Bool
	known := false
	switch client.Transport.(type) {
	case nil, *http.Transport:
		known = true
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GetConn: func(string) { dialling.Store(true) },
			GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
		}))
	}
	resp, err := client.Do(req)
	if err == nil || !known || connected.Load() {
		return resp, err
	}
	var t interface{ Timeout() bool }
	switch {
	case dialling.Load(), req.Context().Err() != nil, errors.As(err, &t) && t.Timeout():
		return nil, NotApplied(fmt.Errorf("%w: %w", ErrNotSent, err))
	}
	return nil, Definite(fmt.Errorf("%w: %w", ErrNotSent, err))
}

// classify maps a non-2xx answer to the ledger's error classes.
func classify(resp *http.Response, err error) error {
	code := resp.StatusCode
	switch {
	case code >= 300 && code < 400:
		return Definite(fmt.Errorf("%w (redirect to %q not followed)", err, resp.Header.Get("Location")))
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		// Not processed: the remote side says so.
		if after, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return NotApplied(seqbox.RetryAfter(err, after))
		}
		return NotApplied(err)
	case code >= 500:
		// A 503 too: a proxy in front of the remote side may answer it
		// after the request went on (and broke there).
		if after, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return seqbox.RetryAfter(err, after)
		}
		return err
	case code >= 400 && code != http.StatusConflict:
		return Definite(err)
	}
	return err
}

// ParseRetryAfter reads an HTTP Retry-After header: delay-seconds (capped
// at a day) or an HTTP date, as a delay from now; false when h is empty or
// neither.
func ParseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, 86400)) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// withoutRedirects is a copy of client (nil: http.DefaultClient) that
// never follows a redirect: net/http would turn a POST into a GET without
// its body after a 302 (and the call would look succeeded), or send the
// body and the Idempotency-Key wherever a 307 points. The 3xx itself is
// the answer.
func withoutRedirects(client *http.Client) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// ReconcileHTTP returns a Reconciler that asks the remote side, with the
// request lookup builds for an uncertain call (typically a GET by its
// idempotency key), whether the effect exists: a 2xx says it does, with
// the reference ref reads; a 404 says it does not, so the ledger may call
// again; anything else leaves the call uncertain. Redirects are not
// followed.
func ReconcileHTTP(client *http.Client, lookup func(ctx context.Context, e Effect) (*http.Request, error), ref HTTPRef) Reconciler {
	client = withoutRedirects(client)
	return func(ctx context.Context, e Effect) (Reconciliation, error) {
		req, err := lookup(ctx, e)
		if err != nil {
			return Reconciliation{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return Reconciliation{}, err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			r, err := ref(resp)
			return Reconciliation{Applied: true, Ref: r}, err
		case resp.StatusCode == http.StatusNotFound:
			return Reconciliation{}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile %s: %s %s: %s", e.IdempotencyKey, req.Method, req.URL.Redacted(), resp.Status)
	}
}

package cli

// The dlq, keys and effects commands with --server: they talk to a running
// `seqbox serve` through its admin JSON API (/v1/admin/…) instead of
// opening the database, and print what the database path prints for the
// same data, through the same internal/ops writers.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

// AdminTokenEnv holds the admin token when --admin-token is not given, as
// for seqbox serve.
const AdminTokenEnv = "SEQBOX_ADMIN_TOKEN"

// readTimeout bounds a read of the admin API.
const readTimeout = 30 * time.Second

// MaxAnswer bounds the body of an admin API answer that the client reads:
// far above what a DLQ or key listing of the gateway amounts to, and far
// below what would exhaust the operator's memory.
const MaxAnswer = 32 << 20

// actionMargin is added to --wait for an action's answer: the gateway
// waits its own --request-wait for the consumer and then answers, so its
// answer (a result or a 504 that says nothing was done) should arrive
// before the client gives up.
const actionMargin = 5 * time.Second

// adminClient calls one gateway's admin API for one command.
type adminClient struct {
	cmd      *cobra.Command
	base     string // the gateway's URL, without a trailing slash
	token    string
	http     *http.Client
	consumer string // the gateway's consumer, once read
}

// remote runs fn against the gateway --server names. --db and --server
// are exclusive; --consumer, when given, must be the gateway's consumer.
func (f *opFlags) remote(cmd *cobra.Command, fn func(c *adminClient) error) error {
	if f.db != "" {
		return fmt.Errorf("%s: --db and --server are mutually exclusive: give --db to read the database, or --server to ask a running seqbox serve",
			subcommandPath(cmd))
	}
	base, err := serverURL(f.server)
	if err != nil {
		return err
	}
	token := f.token
	if token == "" {
		token = strings.TrimSpace(os.Getenv(AdminTokenEnv))
	}
	c := &adminClient{cmd: cmd, base: base, token: token, http: adminHTTP()}
	if f.consumer != "" {
		name, err := c.consumerName()
		if err != nil {
			return err
		}
		if name != f.consumer {
			return fmt.Errorf("--consumer %q: the gateway at %s serves consumer %q", f.consumer, base, name)
		}
	}
	return fn(c)
}

// adminHTTP is the admin client's HTTP client. It never follows a
// redirect: the admin token goes to the --server origin and nowhere else,
// and a 3xx answer is an error (see adminClient.redirected).
func adminHTTP() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// serverURL checks a --server value: an http(s) URL with a host.
func serverURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err == nil && u.User != nil {
		// The admin API takes a bearer token, never the URL's user and
		// password; and a URL that carries them would be repeated in
		// every message that names the gateway.
		return "", fmt.Errorf("--server %s: a user or password in the URL is not used: give the admin token with --admin-token or %s",
			u.Redacted(), AdminTokenEnv)
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--server %q: want the gateway's URL, such as http://127.0.0.1:8080", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// call sends one admin request: body (when not nil) as JSON, the answer
// decoded into out. The answer must be a JSON object whose members named
// in arrays are JSON arrays (the lists the command expects), of at most
// MaxAnswer bytes. Every failure is one line that says what to do; what
// (when not empty) names the thing asked about, after the command.
func (c *adminClient) call(method, path, what string, body, out any, timeout time.Duration, arrays ...string) error {
	ctx, cancel := context.WithTimeout(c.cmd.Context(), timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", subcommandPath(c.cmd), err)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, method, timeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return c.redirected(resp, what)
	}
	if resp.StatusCode != http.StatusOK {
		return c.problem(resp, what)
	}
	answer := func(format string, args ...any) error {
		return fmt.Errorf("%s: the answer of %s to %s %s %s", subcommandPath(c.cmd), c.base, method, path, fmt.Sprintf(format, args...))
	}
	if resp.ContentLength > MaxAnswer {
		return answer("is %d bytes, more than the %d MiB this client reads: is --server a seqbox serve?", resp.ContentLength, MaxAnswer>>20)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		if ctx.Err() != nil {
			return c.transportError(ctx, method, timeout, err)
		}
		return answer("was cut short: %v", err)
	}
	if len(raw) > MaxAnswer {
		return answer("is larger than the %d MiB this client reads: is --server a seqbox serve?", MaxAnswer>>20)
	}
	if err := decodeAnswer(raw, out, arrays); err != nil {
		return answer("is not the admin API's: %v", err)
	}
	return nil
}

// decodeAnswer decodes an admin API answer into out. Every answer of the
// API is a JSON object, and each member named in arrays must be a JSON
// array: another shape ({}, [], null, a list as null) is an error naming
// what was expected, never an empty list.
func decodeAnswer(raw []byte, out any, arrays []string) error {
	if !json.Valid(raw) {
		return json.Unmarshal(raw, out) // the syntax error, with its offset
	}
	want := "a JSON object"
	switch len(arrays) {
	case 0:
	case 1:
		want += fmt.Sprintf(" with a %q array", arrays[0])
	default:
		q := make([]string, len(arrays))
		for i, a := range arrays {
			q[i] = strconv.Quote(a)
		}
		want += " with " + strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1] + " arrays"
	}
	var obj map[string]json.RawMessage
	if kind := jsonKind(raw); kind != "an object" || json.Unmarshal(raw, &obj) != nil {
		return fmt.Errorf("want %s, got %s", want, kind)
	}
	for _, a := range arrays {
		v, ok := obj[a]
		switch {
		case !ok:
			return fmt.Errorf("want %s, got an object without %q", want, a)
		case jsonKind(v) != "an array":
			return fmt.Errorf("want %s, got %q as %s", want, a, jsonKind(v))
		}
	}
	return json.Unmarshal(raw, out)
}

// jsonKind names the kind of a valid JSON value.
func jsonKind(v []byte) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// redirected refuses a 3xx answer. The client follows no redirect, so the
// admin token never reaches another origin: the line names the status and
// where the gateway pointed.
func (c *adminClient) redirected(resp *http.Response, what string) error {
	cmd := subcommandPath(c.cmd)
	if what != "" {
		cmd += ": " + what
	}
	loc := "no Location"
	if u, err := resp.Location(); err == nil {
		loc = "Location " + u.String()
	} else if h := resp.Header.Get("Location"); h != "" {
		loc = "Location " + strconv.Quote(h)
	}
	return fmt.Errorf("%s: the gateway at %s answered %s with %s; redirects are not followed, so that the admin token goes to --server only: give --server the gateway's own URL",
		cmd, c.base, resp.Status, loc)
}

// transportError says that the gateway did not answer, and why.
func (c *adminClient) transportError(ctx context.Context, method string, timeout time.Duration, err error) error {
	cmd := subcommandPath(c.cmd)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && method == http.MethodPost:
		return fmt.Errorf("%s: the gateway at %s gave no answer within %s; the request may still run: check with seqbox %s --server %s",
			cmd, c.base, timeout, afterwards(c.cmd), c.base)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: the gateway at %s gave no answer within %s", cmd, c.base, timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", cmd, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: the gateway at %s does not answer: %v (is seqbox serve running there?)", cmd, c.base, err)
}

// afterwards is the read command that shows what an action did.
func afterwards(cmd *cobra.Command) string {
	if strings.HasPrefix(subcommandPath(cmd), "keys") {
		return "keys list"
	}
	if strings.HasPrefix(subcommandPath(cmd), "effects") {
		return "effects list"
	}
	return "dlq list"
}

// problem turns an error answer into one line: the problem body's title
// and detail (RFC 9457), or the status when the body is not a problem.
func (c *adminClient) problem(resp *http.Response, what string) error {
	cmd := subcommandPath(c.cmd)
	if what != "" {
		cmd += ": " + what
	}
	var p serve.Problem
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if (mt != "application/problem+json" && mt != "application/json") || json.Unmarshal(raw, &p) != nil || p.Title == "" {
		p = serve.Problem{Title: http.StatusText(resp.StatusCode)}
	}
	text := p.Title
	if p.Detail != "" {
		text += ": " + p.Detail
	}
	if resp.StatusCode == http.StatusUnauthorized {
		if c.token == "" {
			return fmt.Errorf("%s: the gateway at %s needs its admin token: give --admin-token or set %s (%d %s)",
				cmd, c.base, AdminTokenEnv, resp.StatusCode, text)
		}
		return fmt.Errorf("%s: the gateway at %s refused the admin token (%d %s): check --admin-token or %s",
			cmd, c.base, resp.StatusCode, text, AdminTokenEnv)
	}
	return fmt.Errorf("%s: the gateway at %s answered %d %s", cmd, c.base, resp.StatusCode, text)
}

// consumerName is the gateway's consumer (its overview says).
func (c *adminClient) consumerName() (string, error) {
	if c.consumer == "" {
		var ov struct {
			Consumer string `json:"consumer"`
		}
		if err := c.call(http.MethodGet, "/v1/admin/overview", "", nil, &ov, readTimeout); err != nil {
			return "", err
		}
		c.consumer = ov.Consumer
	}
	return c.consumer, nil
}

func allQuery(all bool) string {
	if all {
		return "?all=true"
	}
	return ""
}

// listDLQ is dlq list --server.
func (c *adminClient) listDLQ(all bool, out ops.Format) error {
	letters, err := c.deadLetters(all)
	if err != nil {
		return err
	}
	return writeDeadLetters(c.cmd.OutOrStdout(), letters, out)
}

// deadLetters reads the gateway consumer's dead letters (all: resolved
// ones too).
func (c *adminClient) deadLetters(all bool) ([]store.DeadLetter, error) {
	var letters []store.DeadLetter
	for after := int64(0); ; {
		q := url.Values{"limit": {strconv.Itoa(dlqPage)}}
		if all {
			q.Set("all", "true")
		}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		var res serve.DeadLetterPage
		if err := c.call(http.MethodGet, "/v1/admin/dlq?"+q.Encode(), "", nil, &res, readTimeout, "dead_letters"); err != nil {
			return nil, err
		}
		if res.Consumer == "" {
			return nil, c.unreadable(errors.New("its list of dead letters names no consumer"))
		}
		for _, v := range res.DeadLetters {
			letter, err := deadLetterOf(v, res.Consumer)
			if err != nil {
				return nil, c.unreadable(err)
			}
			letters = append(letters, letter)
		}
		if res.NextAfter == nil {
			return letters, nil
		}
		if *res.NextAfter <= after {
			return nil, c.unreadable(fmt.Errorf("its page after dead letter %d named %d as the next page's start", after, *res.NextAfter))
		}
		after = *res.NextAfter
	}
}

// dlqPage is how many dead letters dlq list --server reads a request.
const dlqPage = 1000

// showDLQ is dlq show --server.
func (c *adminClient) showDLQ(seq int64, out ops.Format) error {
	var v serve.DeadLetterView
	path := "/v1/admin/dlq/" + strconv.FormatInt(seq, 10)
	if err := c.call(http.MethodGet, path, fmt.Sprintf("dlq %d", seq), nil, &v, readTimeout); err != nil {
		return err
	}
	if v.Seq != seq {
		// Any JSON object decodes into a view: only the row asked for is
		// the admin API's answer.
		return fmt.Errorf("%s: the answer of %s to GET %s is not the admin API's: want dead letter %d, got one numbered %d",
			subcommandPath(c.cmd), c.base, path, seq, v.Seq)
	}
	// A DLQ row of the API does not name its consumer; the overview does.
	consumer, err := c.consumerName()
	if err != nil {
		return err
	}
	letter, err := deadLetterOf(v, consumer)
	if err != nil {
		return c.unreadable(err)
	}
	return writeDeadLetter(c.cmd.OutOrStdout(), letter, out)
}

// listKeys is keys list --server, in key order as the database path
// prints them (the API sorts by age).
func (c *adminClient) listKeys(all bool, out ops.Format) error {
	var res struct {
		Keys []serve.KeyItem `json:"keys"`
	}
	if err := c.call(http.MethodGet, "/v1/admin/keys"+allQuery(all), "", nil, &res, readTimeout, "keys"); err != nil {
		return err
	}
	reps := make([]ops.KeyReport, len(res.Keys))
	for i, k := range res.Keys {
		reps[i] = k.KeyReport
		if err := reps[i].FromServer(c.base); err != nil {
			return c.unreadable(err)
		}
	}
	slices.SortStableFunc(reps, func(a, b ops.KeyReport) int { return strings.Compare(a.PartitionKey, b.PartitionKey) })
	return ops.WriteKeys(c.cmd.OutOrStdout(), reps, out)
}

// key reads one key in full.
func (c *adminClient) key(key string, parked int) (ops.KeyDetail, error) {
	if key == "" {
		return ops.KeyDetail{}, fmt.Errorf("%s: key %q: %w", subcommandPath(c.cmd), key, store.ErrNotFound)
	}
	var v serve.KeyDetailView
	path := "/v1/admin/keys/" + serve.PathSegment(key) + "?parked_limit=" + strconv.Itoa(parked)
	if err := c.call(http.MethodGet, path, fmt.Sprintf("key %q", key), nil, &v, readTimeout,
		"parked", "gaps", "audit"); err != nil {
		return ops.KeyDetail{}, err
	}
	d, err := keyDetailOf(v, c.base)
	if err != nil {
		return d, c.unreadable(err)
	}
	return d, nil
}

// showKey is keys show --server.
func (c *adminClient) showKey(key string, parked int, out ops.Format) error {
	d, err := c.key(key, parked)
	if err != nil {
		return err
	}
	return writeKey(c.cmd.OutOrStdout(), d, out)
}

// act posts an action with who asks and why, and prints its result as the
// database path does: the admin API's answer less its decisions alias
// (ops.Acted).
func (c *adminClient) act(path string, f *actionFlags) error {
	var res serve.ActionResult
	if err := c.call(http.MethodPost, path, "", serve.ActionRequest{By: f.by, Reason: f.reason}, &res, f.wait+actionMargin, "decisions"); err != nil {
		return err
	}
	if res.Request <= 0 || res.State == "" || res.Results == nil {
		return c.unreadable(errors.New("its action result names no request, state and results"))
	}
	if res.State != "done" {
		return fmt.Errorf("%s: request %d is %s: %s", subcommandPath(c.cmd), res.Request, res.State, res.Error)
	}
	if err := ops.WriteActed(c.cmd.OutOrStdout(), f.out, res.Acted); err != nil {
		return err
	}
	if res.FailedAgain() {
		return failedAgain(c.cmd, res.Acted)
	}
	return nil
}

// resolveDLQ is dlq redrive|skip --server (action "redrive" or "skip");
// the gateway checks that the row exists and is open.
func (c *adminClient) resolveDLQ(seq int64, action string, f *actionFlags) error {
	return c.act("/v1/admin/dlq/"+strconv.FormatInt(seq, 10)+"/"+action, f)
}

// releaseKey is keys release --server, with the database path's checks:
// a key blocked behind a dead letter is released by resolving it.
func (c *adminClient) releaseKey(key string, f *actionFlags) error {
	d, err := c.key(key, 1)
	if err != nil {
		return err
	}
	if b := d.BlockedBy; b != nil {
		return fmt.Errorf("keys release: key %q is blocked behind dead-lettered message source=%q id=%q, not by a gap: %s",
			key, b.Source, b.ID, d.Action)
	}
	if !d.Blocked && d.Turn == nil {
		return fmt.Errorf("keys release: key %q is not blocked (status %s)", key, d.Status)
	}
	return c.act("/v1/admin/keys/"+serve.PathSegment(key)+"/release", f)
}

func (c *adminClient) unreadable(err error) error {
	return fmt.Errorf("%s: the answer of %s is not the admin API's: %w", subcommandPath(c.cmd), c.base, err)
}

// deadLetterOf is a DLQ row of the API as the store reads it.
func deadLetterOf(v serve.DeadLetterView, consumer string) (store.DeadLetter, error) {
	letter := store.DeadLetter{Seq: v.Seq, Consumer: consumer, Source: v.Source, ID: v.ID, PartitionKey: v.PartitionKey,
		ObjectVersion: v.ObjectVersion, PayloadHash: v.PayloadHash, Reason: v.Reason, Attempts: v.Attempts,
		FirstError: v.FirstError, LastError: v.LastError, State: seqboxtype.DeadLetter(v.State), Resolution: v.Resolution,
		Redrives: v.Redrives, History: v.History}
	var err error
	if letter.DeadAt, err = stampOf("dead_at", v.DeadAt); err != nil {
		return letter, err
	}
	if v.ResolvedAt != nil {
		at, err := stampOf("resolved_at", v.ResolvedAt)
		if err != nil {
			return letter, err
		}
		letter.ResolvedAt = &at
	}
	if v.Envelope != nil {
		letter.Envelope = payloadBytes(*v.Envelope)
	}
	return letter, nil
}

// keyDetailOf is a key of the API as the Reporter builds it.
func keyDetailOf(v serve.KeyDetailView, server string) (ops.KeyDetail, error) {
	d := ops.KeyDetail{KeyReport: v.KeyReport, FirstVersion: v.FirstVersion, ParkedTotal: v.ParkedTotal}
	if err := d.FromServer(server); err != nil {
		return d, err
	}
	if v.ParkedNext != nil {
		next, err := ops.ParseParkedCursor(*v.ParkedNext)
		if err != nil {
			return d, fmt.Errorf("parked_next: %w", err)
		}
		d.ParkedNext = next
	}
	for _, p := range v.Parked {
		parkedAt, err := stampOf("parked_at", p.ParkedAt)
		if err != nil {
			return d, err
		}
		holdUntil, err := stampOf("hold_until", p.HoldUntil)
		if err != nil {
			return d, err
		}
		d.Parked = append(d.Parked, store.Parked{Seq: p.Seq, Source: p.Source, ID: p.ID, PartitionKey: p.PartitionKey,
			ObjectVersion: p.ObjectVersion, Reason: seqboxtype.Park(p.Reason), Detail: p.Detail, Envelope: payloadBytes(p.Envelope),
			PayloadHash: p.PayloadHash, ParkedAt: parkedAt, HoldUntil: holdUntil})
	}
	for _, g := range v.Gaps {
		at, err := stampOf("at", g.At)
		if err != nil {
			return d, err
		}
		d.Gaps = append(d.Gaps, store.Gap{Key: v.PartitionKey, FromVersion: g.From, ToVersion: g.To, DecidedBy: g.DecidedBy,
			Reason: g.Reason, At: at})
	}
	for _, a := range v.Audit {
		at, err := stampOf("at", a.At)
		if err != nil {
			return d, err
		}
		d.Audit = append(d.Audit, store.AuditRow{Seq: a.Seq, Source: a.Source, ID: a.ID, PartitionKey: a.PartitionKey,
			ReceivedVersion: a.ReceivedVersion, CurrentVersion: a.CurrentVersion, Outcome: seqboxtype.Outcome(a.Outcome), Reason: a.Reason,
			NextAction: a.NextAction, At: at})
	}
	return d, nil
}

// stampOf reads a time of the API (RFC 3339, UTC); nil is the zero time.
func stampOf(field string, s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: %w", field, *s, err)
	}
	return t, nil
}

// payloadBytes are the exact bytes of an envelope of the API.
func payloadBytes(p serve.Payload) []byte {
	if p.Text != nil {
		return []byte(*p.Text)
	}
	return p.Base64
}

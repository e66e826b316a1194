package serve

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/store"
)

// adminRoutes is the admin JSON API, behind the admin token.
func (s *Server) adminRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/admin/overview", s.overview)
	mux.HandleFunc("GET /v1/admin/keys", s.listKeys)
	mux.HandleFunc("GET /v1/admin/keys/{key}", s.showKey)
	mux.HandleFunc("POST /v1/admin/keys/{key}/release", s.releaseKey)
	mux.HandleFunc("GET /v1/admin/dlq", s.listDLQ)
	mux.HandleFunc("GET /v1/admin/dlq/{seq}", s.showDLQ)
	mux.HandleFunc("POST /v1/admin/dlq/{seq}/redrive", s.redrive)
	mux.HandleFunc("POST /v1/admin/dlq/{seq}/skip", s.skip)
	mux.HandleFunc("GET /v1/admin/inbox", s.listInbox)
	mux.HandleFunc("GET /v1/admin/inbox/{source}/{id}", s.showInbox)
	mux.HandleFunc("GET /v1/admin/collisions", s.collisions)
	mux.HandleFunc("GET /v1/admin/audit", s.audit)
	mux.HandleFunc("GET /v1/admin/retention", s.retentionHandler)
	mux.HandleFunc("GET /v1/admin/requests/{seq}", s.showRequest)
	mux.HandleFunc("GET /v1/admin/consumers", s.listConsumers)
	// No catch-all: an unknown path is the mux's 404 and a known one with
	// another method its 405 with Allow, both problems.
	return problemErrors(mux)
}

// serverError answers 500 without leaking more than the error text.
func (s *Server) serverError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, r, Problem{Type: ProblemNotFound, Status: http.StatusNotFound, Detail: err.Error()})
		return
	}
	s.opt.Logger.Error("seqbox serve: admin request failed", "path", r.URL.Path, "err", err)
	writeProblem(w, r, Problem{Type: ProblemUnavailable, Status: http.StatusInternalServerError, Detail: err.Error()})
}

// reporter builds key reports for r: their advice commands carry
// --server with the URL r came in by, which is what the operator can
// reach (the server's own --db, often a relative path, means nothing
// where they are).
func (s *Server) reporter(r *http.Request) ops.Reporter {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return ops.Reporter{Op: s.store.Executor(), Consumer: s.opt.Consumer, FirstVersion: s.opt.Policy.FirstVersion,
		Now: s.consumerNow(), DB: RedactURL(s.opt.DB), Server: scheme + "://" + r.Host}
}

// Overview is GET /v1/admin/overview: what the dashboard's header shows.
type Overview struct {
	Consumer      string           `json:"consumer"`
	Handler       string           `json:"handler"`
	UptimeSeconds int64            `json:"uptime_seconds"`
	Counts        CountsView       `json:"counts"`
	Outcomes      map[string]int64 `json:"outcomes"`
	// AppliedPerSecond is the mean over the last minute.
	AppliedPerSecond float64 `json:"applied_per_second"`
	QueueReady       int     `json:"queue_ready"`
	QueueLeased      int     `json:"queue_leased"`
	BucketSeconds    int     `json:"bucket_seconds"`
	// WindowSeconds is how far back the chart reaches (ten minutes);
	// Series holds the buckets of that window since the server started
	// (StartedAt), none before: what happened then is not known here.
	WindowSeconds int           `json:"window_seconds"`
	StartedAt     string        `json:"started_at"`
	Series        []SeriesPoint `json:"series"`
	// RejectedAtIngest counts the events POST /v1/events refused with 400
	// since the server started (seqbox_gateway_invalid_events_total): they
	// were never queued, so Outcomes["rejected"] (envelopes the consumer
	// found invalid) does not count them.
	RejectedAtIngest int64 `json:"rejected_at_ingest"`
	// Now is the server's clock, for the ages the dashboard shows.
	Now string `json:"now"`
}

// CountsView are the consumer's row counts.
type CountsView struct {
	InboxRows    int64   `json:"inbox_rows"`
	Applied      int64   `json:"applied"`
	Held         int64   `json:"held"`
	Blocked      int64   `json:"blocked"`
	BlockedKeys  int64   `json:"blocked_keys"`
	DeadLetters  int64   `json:"dead_letters"`
	Keys         int64   `json:"keys"`
	Gaps         int64   `json:"gaps"`
	OldestStuck  *string `json:"oldest_stuck"`
	OldestAgeSec float64 `json:"oldest_stuck_age_seconds"`
	// InboxCountedAt is when InboxRows, Applied and Keys were counted:
	// they read every identity and key, and are counted again only once
	// older than 20 times what the last count took (at least 2 s); the
	// other counts are read at each call.
	InboxCountedAt *string `json:"inbox_counted_at"`
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	c, counted, err := s.counts(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	ready, leased, err := s.queue.Depth(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	totals, series := s.series.snapshot()
	var applied int64
	for _, p := range series[max(0, len(series)-int(time.Minute/seriesBucket)):] {
		applied += p.Counts["applied"]
	}
	handler := "record"
	if s.opt.AgentURL != "" {
		handler = "agent"
	}
	cv := CountsView{InboxRows: c.InboxRows, Applied: c.Applied, Held: c.Held, Blocked: c.Blocked, BlockedKeys: c.BlockedKeys,
		DeadLetters: c.DeadLetters, Keys: c.Keys, Gaps: c.Gaps, OldestStuck: stamp(c.OldestStuck), InboxCountedAt: stamp(counted)}
	if !c.OldestStuck.IsZero() {
		cv.OldestAgeSec = s.consumerNow().Sub(c.OldestStuck).Seconds()
	}
	rejected, err := s.metrics.rejectedAtIngest(s.opt.Consumer)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Overview{Consumer: s.opt.Consumer, Handler: handler, UptimeSeconds: int64(time.Since(s.started).Seconds()),
		Counts: cv, Outcomes: totals, AppliedPerSecond: float64(applied) / time.Minute.Seconds(), QueueReady: ready, QueueLeased: leased,
		BucketSeconds: int(seriesBucket / time.Second), WindowSeconds: int(seriesLen * seriesBucket / time.Second),
		StartedAt: *stamp(s.series.since), Series: series, RejectedAtIngest: rejected, Now: *stamp(s.consumerNow())})
}

// listKeys is GET /v1/admin/keys: the stuck keys (blocked or held), or
// every key with ?all=true, oldest stuck first; ?search= keeps the keys
// whose name holds it (case-insensitive; an exact match comes first), and
// ?limit= the first that many (total says how many matched).
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all, ok := queryAll(w, r)
	if !ok {
		return
	}
	search, bad := querySearch(q, "search")
	if bad != "" {
		badQuery(w, r, "search", bad)
		return
	}
	limit, bad := queryLimit(q, 0, auditScan)
	if bad != "" {
		badQuery(w, r, "limit", bad)
		return
	}
	if all && limit > 0 {
		// A search of every key for a page (the console's): only the
		// page's keys are reported.
		reps, total, err := s.reporter(r).SearchKeys(r.Context(), search, limit)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		now := s.consumerNow()
		items := make([]KeyItem, len(reps))
		for i, rep := range reps {
			items[i] = keyItem(rep, now)
		}
		writeJSON(w, http.StatusOK, map[string]any{"consumer": s.opt.Consumer, "keys": items, "total": total})
		return
	}
	reps, err := s.reporter(r).Keys(r.Context(), all)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if search != "" {
		needle := strings.ToLower(search)
		kept := reps[:0]
		for _, rep := range reps {
			if strings.Contains(strings.ToLower(rep.PartitionKey), needle) {
				kept = append(kept, rep)
			}
		}
		reps = kept
	}
	now := s.consumerNow()
	items := make([]KeyItem, len(reps))
	for i, rep := range reps {
		items[i] = keyItem(rep, now)
	}
	sort.SliceStable(items, func(i, j int) bool {
		if ei, ej := strings.EqualFold(items[i].PartitionKey, search), strings.EqualFold(items[j].PartitionKey, search); search != "" && ei != ej {
			return ei
		}
		a, b := items[i].AgeSeconds, items[j].AgeSeconds
		if a == nil || b == nil {
			return a != nil
		}
		return *a > *b
	})
	total := len(items)
	if limit > 0 && len(items) > limit {
		items = items[:limit]
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumer": s.opt.Consumer, "keys": items, "total": total})
}

// maxParkedPage bounds ?parked_limit of GET /v1/admin/keys/{key}.
const maxParkedPage = 10000

// showKey is GET /v1/admin/keys/{key}: the key, its recorded gaps and
// audit, and a page of its parked messages: ?parked_limit= of them (100
// unless set) from after ?parked_after= (a parked_next).
func (s *Server) showKey(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, bad := queryLimit(url.Values{"limit": q["parked_limit"]}, ops.ParkedShown, maxParkedPage)
	if bad != "" {
		badQuery(w, r, "parked_limit", bad)
		return
	}
	var after *store.ParkedCursor
	if v := q.Get("parked_after"); v != "" {
		c, err := ops.ParseParkedCursor(v)
		if err != nil {
			badQuery(w, r, "parked_after", err.Error())
			return
		}
		after = c
	}
	d, err := s.reporter(r).KeyPage(r.Context(), r.PathValue("key"), after, limit)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, KeyDetailView{KeyItem: keyItem(d.KeyReport, s.consumerNow()), KeyRecord: KeyRecordOf(d)})
}

// queryAll reads ?all, true or false (false when absent), answering 400
// when it is neither.
func queryAll(w http.ResponseWriter, r *http.Request) (bool, bool) {
	switch v := r.URL.Query().Get("all"); v {
	case "", "false":
		return false, true
	case "true":
		return true, true
	default:
		badQuery(w, r, "all", strconv.Quote(v)+" is not true or false")
		return false, false
	}
}

// DeadLetterPage is GET /v1/admin/dlq: the consumer's dead letters
// (open ones, or every one with ?all=true) in the order they died, from
// the one after ?after= (a seq), at most ?limit= of them (every one when
// absent).
type DeadLetterPage struct {
	Consumer    string           `json:"consumer"`
	DeadLetters []DeadLetterView `json:"dead_letters"`
	// NextAfter, when more rows follow this page, is the after of the
	// next one.
	NextAfter *int64 `json:"next_after"`
}

// maxDLQPage bounds ?limit of GET /v1/admin/dlq.
const maxDLQPage = 10000

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) {
	all, ok := queryAll(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, bad := queryLimit(q, 0, maxDLQPage)
	if bad != "" {
		badQuery(w, r, "limit", bad)
		return
	}
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			badQuery(w, r, "after", strconv.Quote(v)+" is not a dead letter's seq (a number from 0: the next_after of the page before)")
			return
		}
		after = n
	}
	p := store.DeadLetterListParams{Consumer: s.opt.Consumer, All: all, After: after}
	if limit > 0 {
		p.Limit = limit + 1 // one more says whether a next page exists
	}
	letters, err := s.store.Executor().DeadLetterList(r.Context(), p)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	page := DeadLetterPage{Consumer: s.opt.Consumer, DeadLetters: []DeadLetterView{}}
	if limit > 0 && len(letters) > limit {
		letters = letters[:limit]
		next := letters[limit-1].Seq
		page.NextAfter = &next
	}
	for _, letter := range letters {
		page.DeadLetters = append(page.DeadLetters, DeadLetterViewOf(letter, false))
	}
	writeJSON(w, http.StatusOK, page)
}

// pathSeq reads the {seq} path value of a dead letter, answering 400 when
// it is not one.
func pathSeq(w http.ResponseWriter, r *http.Request) (int64, bool) {
	return pathNumber(w, r, "a DLQ sequence number")
}

// pathNumber reads the {seq} path value, a positive integer, answering
// 400 naming what it should be (what) when it is not one.
func pathNumber(w http.ResponseWriter, r *http.Request, what string) (int64, bool) {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "seq",
			Detail: "seq: " + strconv.Quote(r.PathValue("seq")) + " is not " + what + " (a positive integer)"})
		return 0, false
	}
	return seq, true
}

func (s *Server) showDLQ(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathSeq(w, r)
	if !ok {
		return
	}
	letter, err := s.store.Executor().DeadLetterGet(r.Context(), store.DeadLetterRef{Consumer: s.opt.Consumer, Seq: seq})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, DeadLetterViewOf(letter, true))
}

// collisions is GET /v1/admin/collisions: the oldest ?limit= parked
// collisions (every one up to MaxCollisions unless set), with both
// payloads side by side, and more when others are parked.
func (s *Server) collisions(w http.ResponseWriter, r *http.Request) {
	limit, bad := queryLimit(r.URL.Query(), MaxCollisions, MaxCollisions)
	if bad != "" {
		badQuery(w, r, "limit", bad)
		return
	}
	out, more, err := Collisions(r.Context(), s.store.Executor(), s.opt.Consumer, limit)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumer": s.opt.Consumer, "collisions": out, "more": more})
}

// identity reads what the inbox, the decisions and the gateway hold for
// (source, id).
func (s *Server) identity(ctx context.Context, source, id string) (IdentityView, bool, error) {
	op := s.store.Executor()
	seen, err := op.InboxSeen(ctx, store.MessageRef{Consumer: s.opt.Consumer, Source: source, ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return IdentityView{}, false, nil
	}
	if err != nil {
		return IdentityView{}, false, err
	}
	v := IdentityView{Source: source, ID: id, InboxOutcome: string(seen.Outcome), PayloadHash: seen.PayloadHash}
	if d, err := op.DecisionGet(ctx, store.MessageRef{Consumer: s.opt.Consumer, Source: source, ID: id}); err == nil {
		txt := string(d.Value)
		v.AgentDecision = &txt
	} else if !errors.Is(err, store.ErrNotFound) {
		return v, false, err
	}
	env, ok, err := envelopeOf(ctx, s.store.Executor(), s.opt.Consumer, source, id)
	if err != nil {
		return v, false, err
	}
	if ok {
		p := payload(env)
		v.Envelope = &p
	}
	return v, true, nil
}

func (s *Server) retentionHandler(w http.ResponseWriter, r *http.Request) {
	v, err := s.retentionView(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// trimmed reports whether s is blank.
func blank(s string) bool { return strings.TrimSpace(s) == "" }

package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
)

// routes wires every endpoint of docs/design.md §16.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	ingest := bearer{token: []byte(s.opt.IngestToken), realm: "seqbox-ingest"}
	var ingestH http.Handler = http.HandlerFunc(s.ingest)
	if s.opt.IngestToken != "" {
		ingestH = ingest.wrap(ingestH)
	}
	mux.Handle("POST /v1/events", ingestH)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	// The agent API: the event's token is its only credential.
	mux.HandleFunc("POST /v1/events/{source}/{id}/steps/{name}", s.agentStep)
	mux.HandleFunc("POST /v1/events/{source}/{id}/effects/{action}", s.agentEffect)

	admin := bearer{token: []byte(s.opt.AdminToken), realm: "seqbox-admin",
		disable: "the admin API is disabled: start seqbox serve with --admin-token (or SEQBOX_ADMIN_TOKEN) and send it as a Bearer token"}
	mux.Handle("/v1/admin/", admin.wrap(s.adminRoutes()))
	mux.Handle("/v1/admin/effects", admin.wrap(s.effectsRoutes()))
	mux.Handle("/v1/admin/effects/", admin.wrap(s.effectsRoutes()))

	ui := problemFiles(uiHandler())
	if s.opt.AdminToken == "" {
		ui = disabledUI(admin) // always 401, with the way to enable it: a page for a browser
	}
	mux.Handle("GET /ui/", ui)
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	return securityHeaders(problemErrors(mux))
}

// problemErrors serves mux, answering its 404 (no route) and 405 (a route
// with other methods, Allow kept) as problem documents, like every other
// error of the gateway, instead of http.ServeMux's plain text.
//
// Only those requests go through a problemWriter: a wrapped writer would
// hide the server's own from http.MaxBytesReader, which then could not
// tell the server to close the connection after a 413.
func problemErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			if h, ok := slashSegmentRoute(mux, r); ok {
				h.ServeHTTP(w, r)
				return
			}
			w = &problemWriter{ResponseWriter: w, r: r}
		}
		mux.ServeHTTP(w, r)
	})
}

// slashSegmentRoute routes a request one of whose path segments is
// exactly an escaped slash (%2F): a key "/", or a source "/" (a
// CloudEvents source is a URI-reference). http.ServeMux finds no route
// for such a segment, though it routes "a%2Fb". The route is looked up
// with those segments spelled otherwise, and r gets every wildcard's
// value from its own escaped path, as the mux would have set them; the
// handler is then called directly. It reports false when no route
// matches that way either.
func slashSegmentRoute(mux *http.ServeMux, r *http.Request) (http.Handler, bool) {
	segs := strings.Split(r.URL.EscapedPath(), "/")
	probe := slices.Clone(segs)
	found := false
	for i, s := range segs {
		if strings.EqualFold(s, "%2F") {
			probe[i], found = probeSegment, true
		}
	}
	esc := strings.Join(segs, "/")
	if !found || cleanPath(esc) != esc {
		// A path to clean is the mux's to redirect, with its own
		// spelling of the segment.
		return nil, false
	}
	u := *r.URL
	u.RawPath = strings.Join(probe, "/")
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, false
	}
	r2 := r.Clone(r.Context())
	r2.URL = &u
	h, pattern := mux.Handler(r2)
	if pattern == "" || strings.Contains(pattern, probeSegment) {
		// No route, or the mux's redirect to a cleaned path, which would
		// name the probe's spelling: the mux answers the request itself.
		return nil, false
	}
	// The pattern's path ("[METHOD ][HOST]/path"): its segments line up
	// with the request's.
	_, patternPath, _ := strings.Cut(pattern, "/")
	for i, p := range strings.Split("/"+patternPath, "/") {
		if !strings.HasPrefix(p, "{") || i >= len(segs) {
			continue
		}
		name := strings.TrimSuffix(strings.Trim(p, "{}"), "...")
		value := strings.Join(segs[i:], "/")
		if !strings.HasSuffix(p, "...}") {
			value = segs[i]
		}
		if v, err := url.PathUnescape(value); err == nil && name != "$" {
			r.SetPathValue(name, v)
		}
	}
	return h, true
}

// cleanPath is p as http.ServeMux cleans a request's path before it
// routes it (path.Clean, keeping a trailing slash).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// probeSegment is slashSegmentRoute's spelling of a %2F segment: any
// wildcard matches it, no literal does, and no pattern holds it.
const probeSegment = "%2F_"

// problemFiles serves files (an http.FileServer, which reads no body)
// with its plain-text 404 and 405 answered as problem documents.
func problemFiles(files http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		files.ServeHTTP(&problemWriter{ResponseWriter: w, r: r}, r)
	})
}

// problemWriter writes a problem instead of a text/plain 404 or 405; any
// other answer goes through unchanged.
type problemWriter struct {
	http.ResponseWriter
	r *http.Request
	// swallow is set once the problem is written: the text that follows
	// is dropped.
	swallow bool
}

// WriteHeader replaces a text/plain 404 or 405 with a problem.
func (pw *problemWriter) WriteHeader(code int) {
	if pw.swallow {
		return
	}
	if (code != http.StatusNotFound && code != http.StatusMethodNotAllowed) ||
		!strings.HasPrefix(pw.Header().Get("Content-Type"), "text/plain") {
		pw.ResponseWriter.WriteHeader(code)
		return
	}
	pw.swallow = true
	p := Problem{Type: ProblemNotFound, Status: code, Detail: "no such path: the API is described at /v1/openapi.json"}
	if code == http.StatusMethodNotAllowed {
		p.Type = ProblemMethod
		p.Detail = fmt.Sprintf("%s is not allowed on %s; allowed: %s", pw.r.Method, pw.r.URL.Path, pw.Header().Get("Allow"))
	}
	pw.Header().Del("Content-Length")
	writeProblem(pw.ResponseWriter, pw.r, p)
}

// Write drops the text of a replaced answer.
func (pw *problemWriter) Write(b []byte) (int, error) {
	if pw.swallow {
		return len(b), nil
	}
	return pw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (pw *problemWriter) Unwrap() http.ResponseWriter { return pw.ResponseWriter }

// securityHeaders sets the headers every answer carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "uptime_seconds": int64(time.Since(s.started).Seconds())})
}

// readyz answers 200 when the database and the queue answer, the
// consumer runs and ingest queues events; 503 otherwise (an ingest that
// could not queue its events counts for ingestFailureHold, unless one
// succeeds since), and while shutting down.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "queue": "ok", "consumer": "ok"}
	ready := true
	if err := s.store.DB().PingContext(ctx); err != nil {
		checks["database"], ready = err.Error(), false
	}
	if _, _, err := s.queue.Depth(ctx); err != nil {
		checks["queue"], ready = err.Error(), false
	}
	if p := s.runErr.Load(); p != nil {
		checks["consumer"], ready = (*p).Error(), false
	}
	if s.draining.Load() {
		checks["consumer"], ready = "shutting down", false
	}
	checks["ingest"] = "ok"
	if f := s.ingestFailed.Load(); f != nil && time.Since(f.at) < ingestFailureHold {
		checks["ingest"], ready = "events could not be queued durably at "+f.at.UTC().Format(time.RFC3339)+": "+f.err.Error(), false
	}
	if s.opt.AgentURL != "" {
		// Shown, not failed on: ingest works while the agent is down, and
		// the events wait for it in the queue.
		checks["agent"] = "ok"
		if open, until := s.circuit.state(); open {
			checks["agent"] = "circuit open: dispatch paused, next probe at " + until.UTC().Format(time.RFC3339Nano)
		}
	}
	if !ready {
		writeProblem(w, r, Problem{Type: ProblemUnavailable, Title: "Not ready", Status: http.StatusServiceUnavailable,
			Detail: "a dependency does not answer: " + summarize(checks)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

func summarize(checks map[string]string) string {
	out := ""
	for _, k := range []string{"database", "queue", "consumer", "ingest"} {
		if checks[k] != "ok" {
			if out != "" {
				out += "; "
			}
			out += k + ": " + checks[k]
		}
	}
	return out
}

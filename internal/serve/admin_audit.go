package serve

// GET /v1/admin/audit: the recorded outcomes that applied nothing (stale,
// expired, semantic duplicates, collisions, rejects, holds, blocks,
// retries, dead letters), each with its reason and the version it met;
// for one object, for one event id, or the most recent of all, filtered
// by outcome and a search, a page at a time.

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// auditScan bounds how many recent audit rows (of the object, with
// ?object) a search reads.
const auditScan = 10000

// auditDefaultLimit is a page's rows when the query says none.
const auditDefaultLimit = 200

// maxSearch bounds a search string.
const maxSearch = 256

// IdentityView is what is recorded about one identity.
type IdentityView struct {
	Source        string   `json:"source"`
	ID            string   `json:"id"`
	InboxOutcome  string   `json:"inbox_outcome"`
	PayloadHash   string   `json:"payload_hash"`
	AgentDecision *string  `json:"agent_verdict"` // the HTTP API's name
	Envelope      *Payload `json:"envelope"`
}

// AuditPage is GET /v1/admin/audit's answer.
type AuditPage struct {
	Consumer string `json:"consumer"`
	// Object or ID is the query's, when it named one.
	Object string `json:"object,omitempty"`
	ID     string `json:"id,omitempty"`
	// Identities (by id only) is what the inbox holds for the id.
	Identities *[]IdentityView `json:"identities,omitempty"`
	// Audit is the page: the newest matching rows (older than before),
	// newest last.
	Audit []AuditView `json:"audit"`
	// NextBefore, when more rows match, is the before of the next (older)
	// page.
	NextBefore *int64 `json:"next_before"`
	// Scanned is how many of the newest audit rows were searched, at most
	// ScanLimit; ScanComplete is false when older ones were left unread.
	Scanned      int  `json:"scanned"`
	ScanLimit    int  `json:"scan_limit"`
	ScanComplete bool `json:"scan_complete"`
}

// auditQuery is the validated query of GET /v1/admin/audit.
type auditQuery struct {
	object, id, source, search string
	outcomes                   map[seqboxtype.Outcome]bool
	before                     int64
	limit                      int
}

// badQuery is a 400 naming the query parameter.
func badQuery(w http.ResponseWriter, r *http.Request, field, detail string) {
	writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: field, Detail: field + ": " + detail})
}

// queryLimit reads ?limit (def when absent), 1 to max.
func queryLimit(q url.Values, def, max int) (int, string) {
	v := q.Get("limit")
	if v == "" {
		return def, ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Sprintf("%q is not a number from 1 to %d", v, max)
	}
	return n, ""
}

// querySearch reads a search parameter: at most maxSearch bytes.
func querySearch(q url.Values, name string) (string, string) {
	v := q.Get(name)
	if len(v) > maxSearch {
		return "", fmt.Sprintf("at most %d bytes", maxSearch)
	}
	return v, ""
}

// parseAuditQuery validates the query; a bad parameter is (its name, what
// is wrong).
func parseAuditQuery(q url.Values) (auditQuery, string, string) {
	a := auditQuery{object: q.Get("object"), id: q.Get("id"), source: q.Get("source")}
	if a.object != "" && a.id != "" {
		return a, "object", "give ?object=PARTITIONKEY or ?id=EVENTID, not both (neither: the most recent of all)"
	}
	var bad string
	if a.limit, bad = queryLimit(q, auditDefaultLimit, auditScan); bad != "" {
		return a, "limit", bad
	}
	if a.search, bad = querySearch(q, "q"); bad != "" {
		return a, "q", bad
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return a, "before", fmt.Sprintf("%q is not an audit row's seq (a positive number: the next_before of the page before)", v)
		}
		a.before = n
	}
	if v := q.Get("outcome"); v != "" {
		a.outcomes = map[seqboxtype.Outcome]bool{}
		for _, o := range strings.Split(v, ",") {
			oc := seqboxtype.Outcome(strings.TrimSpace(o))
			switch {
			case oc == seqboxtype.Applied:
				return a, "outcome", "applied events are not audited: the audit holds the outcomes that applied nothing"
			case oc == seqboxtype.Duplicate:
				return a, "outcome", "duplicates are counted on their identity's inbox row, not audited (GET /v1/admin/audit?id=ID shows the inbox)"
			case !oc.Valid():
				return a, "outcome", fmt.Sprintf("%q is not an outcome (docs/design.md §4); give one or more, comma-separated, of %s", oc, auditedOutcomes())
			}
			a.outcomes[oc] = true
		}
	}
	return a, "", ""
}

// auditedOutcomes lists the outcomes the audit records.
func auditedOutcomes() string {
	var out []string
	for _, o := range seqboxtype.Outcomes() {
		if o != seqboxtype.Applied && o != seqboxtype.Duplicate {
			out = append(out, string(o))
		}
	}
	return strings.Join(out, ", ")
}

// match reports whether row a is one the query asks for.
func (q auditQuery) match(a store.AuditRow) bool {
	if q.before > 0 && a.Seq >= q.before {
		return false
	}
	if q.id != "" && a.ID != q.id {
		return false
	}
	if q.source != "" && a.Source != q.source {
		return false
	}
	if q.outcomes != nil && !q.outcomes[a.Outcome] {
		return false
	}
	if q.search == "" {
		return true
	}
	needle := strings.ToLower(q.search)
	for _, f := range []string{a.PartitionKey, a.Source, a.ID, a.Reason, a.NextAction} {
		if strings.Contains(strings.ToLower(f), needle) {
			return true
		}
	}
	return false
}

// audit is GET /v1/admin/audit: ?object=KEY (one object's rows), ?id=ID
// (an event id's, with what the inbox holds for it), or neither (the
// most recent rows of every object); each narrowed by &source, &outcome
// (comma-separated), &q (a case-insensitive search of the key, source,
// id, reason and next action), a page of &limit rows older than &before.
// The newest auditScan rows (of the object) are searched.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	q, field, bad := parseAuditQuery(r.URL.Query())
	if field != "" {
		badQuery(w, r, field, bad)
		return
	}
	ctx := r.Context()
	as, err := s.store.Executor().AuditList(ctx, store.AuditListParams{Consumer: s.opt.Consumer, Key: q.object, Limit: auditScan})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	page := AuditPage{Consumer: s.opt.Consumer, Object: q.object, ID: q.id, Audit: []AuditView{}, Scanned: len(as), ScanLimit: auditScan,
		ScanComplete: len(as) < auditScan}
	var matched []store.AuditRow
	for _, a := range as {
		if q.match(a) {
			matched = append(matched, a)
		}
	}
	if len(matched) > q.limit {
		matched = matched[len(matched)-q.limit:]
		page.NextBefore = &matched[0].Seq
	}
	for _, a := range matched {
		page.Audit = append(page.Audit, AuditViewOf(a))
	}
	if q.id != "" {
		sources := map[string]bool{}
		if q.source != "" {
			sources[q.source] = true
		}
		for _, a := range as {
			if a.ID == q.id && (q.source == "" || a.Source == q.source) {
				sources[a.Source] = true
			}
		}
		idents := []IdentityView{}
		for src := range sources {
			v, found, err := s.identity(ctx, src, q.id)
			if err != nil {
				s.serverError(w, r, err)
				return
			}
			if found {
				idents = append(idents, v)
			}
		}
		sort.Slice(idents, func(i, j int) bool { return idents[i].Source < idents[j].Source })
		page.Identities = &idents
	}
	writeJSON(w, http.StatusOK, page)
}

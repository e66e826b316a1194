package serve

import (
	"net/http"
	"strconv"

	"github.com/seqbox/seqbox/store"
)

// InboxView is one inbox identity, the one JSON view of it (GET
// /v1/admin/inbox and `seqbox inbox show|list --output json`): what the
// consumer recorded of the event, with the envelope attributes DESIGN §1
// says are carried and shown under their CloudEvents names.
type InboxView struct {
	Source          string  `json:"source"`
	ID              string  `json:"id"`
	Outcome         string  `json:"outcome"`
	Type            string  `json:"type"`
	PartitionKey    string  `json:"partitionkey"`
	ObjectVersion   *int64  `json:"objectversion"`
	BusinessKey     string  `json:"businesskey"`
	TenantID        string  `json:"tenantid"`
	DataSchema      string  `json:"dataschema"`
	CausationID     string  `json:"causationid"`
	PayloadHash     string  `json:"payload_hash"`
	ReceivedAt      *string `json:"received_at"`
	ProcessedAt     *string `json:"processed_at"`
	RetentionUntil  *string `json:"retention_until"`
	ResultReference string  `json:"result_reference"`
}

// InboxViewOf is r as the admin API and the CLI's JSON show it.
func InboxViewOf(r store.InboxRow) InboxView {
	v := InboxView{Source: r.Source, ID: r.ID, Outcome: string(r.Outcome), Type: r.EventType, PartitionKey: r.PartitionKey,
		ObjectVersion: r.ObjectVersion, BusinessKey: r.BusinessKey, TenantID: r.Tenant, DataSchema: r.ContractVersion,
		CausationID: r.CausationID, PayloadHash: r.PayloadHash, ReceivedAt: stamp(r.ReceivedAt),
		RetentionUntil: stamp(r.RetentionUntil), ResultReference: r.ResultReference}
	if r.ProcessedAt != nil {
		v.ProcessedAt = stamp(*r.ProcessedAt)
	}
	return v
}

// DefaultInboxListLimit and MaxInboxListLimit bound GET /v1/admin/inbox
// and `seqbox inbox list`: the rows listed when no limit is given, and
// the most a listing returns.
const (
	DefaultInboxListLimit = 50
	MaxInboxListLimit     = 1000
)

// listInbox is GET /v1/admin/inbox?tenant=&causation=&dataschema=&limit=:
// the identities of a tenant, a cause or a contract, newest first.
func (s *Server) listInbox(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.InboxListParams{Consumer: s.opt.Consumer, Tenant: q.Get("tenant"), CausationID: q.Get("causation"), DataSchema: q.Get("dataschema"),
		Limit: DefaultInboxListLimit}
	if p.Tenant == "" && p.CausationID == "" && p.DataSchema == "" {
		writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "tenant",
			Detail: "tenant, causation or dataschema is required: the inbox is listed by one or more of them"})
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxInboxListLimit {
			writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "limit",
				Detail: "limit: " + strconv.Quote(l) + " is not a number from 1 to " + strconv.Itoa(MaxInboxListLimit)})
			return
		}
		p.Limit = n
	}
	rows, err := s.store.Executor().InboxList(r.Context(), p)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := make([]InboxView, len(rows))
	for i, row := range rows {
		out[i] = InboxViewOf(row)
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumer": s.opt.Consumer, "identities": out})
}

// showInbox is GET /v1/admin/inbox/{source}/{id}: one identity, 404 when
// the consumer never recorded it (or retention purged it).
func (s *Server) showInbox(w http.ResponseWriter, r *http.Request) {
	row, err := s.store.Executor().InboxGet(r.Context(), store.MessageRef{Consumer: s.opt.Consumer, Source: r.PathValue("source"), ID: r.PathValue("id")})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, InboxViewOf(row))
}

package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/spf13/cobra"
)

func inboxCmd() *cobra.Command {
	return groupCmd("inbox", "Look up what a consumer recorded of its messages",
		inboxShowCmd(), inboxListCmd())
}

func inboxShowCmd() *cobra.Command {
	var f opFlags
	c := &cobra.Command{
		Use:   "show SOURCE ID",
		Short: "Show one identity as the consumer's inbox recorded it: outcome, attributes, times",
		Long: `Show one identity of the consumer's inbox: its outcome, its event's type,
partition key and version, business key, tenantid, dataschema and
causationid, its payload hash, when it was received and processed, and until
when it is kept. An identity the consumer never recorded, or whose retention
ended, is not found (a non-zero exit, as dlq show's).`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("%s: expects the SOURCE and ID of one event, got %d arguments", subcommandPath(c), len(args))
			}
			if blank(args[0]) || blank(args[1]) {
				return fmt.Errorf("%s: SOURCE and ID must not be empty", subcommandPath(c))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			source, id := args[0], args[1]
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.showInbox(source, id, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				row, err := s.store.Executor().InboxGet(cmd.Context(), store.MessageRef{Consumer: s.reg.Consumer, Source: source, ID: id})
				if err != nil {
					return s.notFound(fmt.Errorf("inbox %s %s: %w", strconv.Quote(source), strconv.Quote(id), err))
				}
				return writeInboxRow(cmd.OutOrStdout(), row, f.out)
			})
		},
	}
	f.register(c, true)
	return c
}

func inboxListCmd() *cobra.Command {
	var f opFlags
	var p store.InboxListParams
	c := &cobra.Command{
		Use:   "list --tenant T | --causation C | --dataschema S",
		Short: "List the identities of a tenant, a cause or a contract, newest first",
		Long: `List the consumer's identities whose event carried the tenantid given with
--tenant, the causationid given with --causation, the dataschema given with
--dataschema, or all of those given, newest first, at most --limit of them.
Each filter is searched in an index of its own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p.Tenant == "" && p.CausationID == "" && p.DataSchema == "" {
				return fmt.Errorf("%s: --tenant, --causation or --dataschema is required (the inbox is listed by them)", subcommandPath(cmd))
			}
			if p.Limit < 1 || p.Limit > serve.MaxInboxListLimit {
				return fmt.Errorf("%s: --limit %d: from 1 to %d", subcommandPath(cmd), p.Limit, serve.MaxInboxListLimit)
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.listInbox(p, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				p.Consumer = s.reg.Consumer
				rows, err := s.store.Executor().InboxList(cmd.Context(), p)
				if err != nil {
					return err
				}
				return writeInboxRows(cmd.OutOrStdout(), rows, f.out)
			})
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&p.Tenant, "tenant", "", "the events' tenantid")
	c.Flags().StringVar(&p.CausationID, "causation", "", "the events' causationid")
	c.Flags().StringVar(&p.DataSchema, "dataschema", "", "the events' dataschema")
	c.Flags().IntVar(&p.Limit, "limit", serve.DefaultInboxListLimit, "the most identities listed")
	return c
}

// writeInboxRows prints identities: a table, or the admin API's JSON
// views.
func writeInboxRows(w io.Writer, rows []store.InboxRow, out ops.Format) error {
	if !out.Structured() {
		return ops.WriteInboxRows(w, rows)
	}
	views := make([]serve.InboxView, len(rows))
	for i, r := range rows {
		views[i] = serve.InboxViewOf(r)
	}
	return ops.WriteRows(w, out, views)
}

// writeInboxRow prints one identity in full: text, or the admin API's
// JSON view.
func writeInboxRow(w io.Writer, row store.InboxRow, out ops.Format) error {
	if !out.Structured() {
		return ops.WriteInboxRow(w, row)
	}
	return ops.NewJSONEncoder(w).Encode(serve.InboxViewOf(row))
}

// showInbox is inbox show --server.
func (c *adminClient) showInbox(source, id string, out ops.Format) error {
	var v serve.InboxView
	path := "/v1/admin/inbox/" + serve.PathSegment(source) + "/" + serve.PathSegment(id)
	what := fmt.Sprintf("inbox %s %s", strconv.Quote(source), strconv.Quote(id))
	if err := c.call(http.MethodGet, path, what, nil, &v, readTimeout); err != nil {
		return err
	}
	if v.Source != source || v.ID != id {
		// Any JSON object decodes into a view: only the identity asked
		// for is the admin API's answer.
		return fmt.Errorf("%s: the answer of %s to GET %s is not the admin API's: want identity %s %s, got %s %s",
			subcommandPath(c.cmd), c.base, path, strconv.Quote(source), strconv.Quote(id), strconv.Quote(v.Source), strconv.Quote(v.ID))
	}
	consumer, err := c.consumerName()
	if err != nil {
		return err
	}
	row, err := inboxRowOf(v, consumer)
	if err != nil {
		return c.unreadable(err)
	}
	return writeInboxRow(c.cmd.OutOrStdout(), row, out)
}

// listInbox is inbox list --server.
func (c *adminClient) listInbox(p store.InboxListParams, out ops.Format) error {
	q := url.Values{"limit": {strconv.Itoa(p.Limit)}}
	if p.Tenant != "" {
		q.Set("tenant", p.Tenant)
	}
	if p.CausationID != "" {
		q.Set("causation", p.CausationID)
	}
	if p.DataSchema != "" {
		q.Set("dataschema", p.DataSchema)
	}
	var res struct {
		Consumer   string            `json:"consumer"`
		Identities []serve.InboxView `json:"identities"`
	}
	if err := c.call(http.MethodGet, "/v1/admin/inbox?"+q.Encode(), "", nil, &res, readTimeout, "identities"); err != nil {
		return err
	}
	if res.Consumer == "" {
		return c.unreadable(errors.New("its list of identities names no consumer"))
	}
	rows := make([]store.InboxRow, len(res.Identities))
	for i, v := range res.Identities {
		row, err := inboxRowOf(v, res.Consumer)
		if err != nil {
			return c.unreadable(err)
		}
		rows[i] = row
	}
	return writeInboxRows(c.cmd.OutOrStdout(), rows, out)
}

// inboxRowOf is an identity of the API as the store reads it.
func inboxRowOf(v serve.InboxView, consumer string) (store.InboxRow, error) {
	r := store.InboxRow{Consumer: consumer, Source: v.Source, ID: v.ID, Outcome: seqboxtype.Outcome(v.Outcome), EventType: v.Type,
		PartitionKey: v.PartitionKey, ObjectVersion: v.ObjectVersion, BusinessKey: v.BusinessKey, Tenant: v.TenantID,
		ContractVersion: v.DataSchema, CausationID: v.CausationID, PayloadHash: v.PayloadHash, ResultReference: v.ResultReference}
	var err error
	if r.ReceivedAt, err = stampOf("received_at", v.ReceivedAt); err != nil {
		return r, err
	}
	if r.RetentionUntil, err = stampOf("retention_until", v.RetentionUntil); err != nil {
		return r, err
	}
	if v.ProcessedAt != nil {
		at, err := stampOf("processed_at", v.ProcessedAt)
		if err != nil {
			return r, err
		}
		r.ProcessedAt = &at
	}
	return r, nil
}

package ops

import (
	"io"

	"github.com/seqbox/seqbox/store"
)

// WriteInboxRows prints inbox identities as a table, in the order given
// (newest first, as the store lists them).
func WriteInboxRows(w io.Writer, rows []store.InboxRow) error {
	t := newTable(w, "RECEIVED_AT", "SOURCE", "ID", "OUTCOME", "TYPE", "PARTITIONKEY", "OBJECTVERSION", "TENANTID", "CAUSATIONID")
	for _, r := range rows {
		t.row(timeText(r.ReceivedAt), r.Source, r.ID, string(r.Outcome), r.EventType, r.PartitionKey, version(r.ObjectVersion),
			r.Tenant, r.CausationID)
	}
	return t.flush()
}

// WriteInboxRow prints one inbox identity in full, one field a line, the
// envelope attributes under their CloudEvents names.
func WriteInboxRow(w io.Writer, r store.InboxRow) error {
	var processed string
	if r.ProcessedAt != nil {
		processed = timeText(*r.ProcessedAt)
	}
	f := newFields(w)
	f.add("consumer", r.Consumer)
	f.add("source", r.Source)
	f.add("id", r.ID)
	f.add("outcome", string(r.Outcome))
	f.add("type", r.EventType)
	f.add("partitionkey", r.PartitionKey)
	f.add("objectversion", version(r.ObjectVersion))
	f.add("businesskey", r.BusinessKey)
	f.add("tenantid", r.Tenant)
	f.add("dataschema", r.ContractVersion)
	f.add("causationid", r.CausationID)
	f.add("payload_hash", r.PayloadHash)
	f.add("received_at", timeText(r.ReceivedAt))
	f.add("processed_at", processed)
	f.add("retention_until", timeText(r.RetentionUntil))
	f.add("result_reference", r.ResultReference)
	return f.flush()
}

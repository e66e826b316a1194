-- The event's causationid on its inbox row, beside the tenantid and
-- dataschema it already kept (DESIGN §1: carried, indexed, shown), and
-- the indexes an operator finds a tenant's, a cause's or a contract's
-- messages by (seqbox inbox list --tenant|--causation|--dataschema),
-- newest first. Each is partial: a row without the attribute adds no
-- entry, so an inbox whose producers send none of them pays nothing more
-- per insert. Building them reads the inbox once.
ALTER TABLE seqbox_inbox ADD COLUMN causation TEXT NOT NULL DEFAULT '';
CREATE INDEX seqbox_inbox_tenant ON seqbox_inbox (consumer, tenant, received_at) WHERE tenant <> '';
CREATE INDEX seqbox_inbox_causation ON seqbox_inbox (consumer, causation, received_at) WHERE causation <> '';
CREATE INDEX seqbox_inbox_dataschema ON seqbox_inbox (consumer, contract_version, received_at) WHERE contract_version <> ''

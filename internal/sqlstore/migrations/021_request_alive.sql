-- A running operator request's last sign of life: its taker renews it
-- while the action runs, and a request whose taker fell silent fails
-- instead of staying running for ever (docs/design.md §9).
ALTER TABLE seqbox_requests ADD COLUMN alive_at BIGINT

package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
)

// RecordBatchHandler is the record handler as a seqbox.BatchHandler: the
// same rows (one effect row per applied event, and each object's state at
// its last applied event), written with one multi-row statement per table
// per batch instead of two statements per event. postgres selects the
// spelling: a column per array parameter (unnest) on PostgreSQL, multi-row
// VALUES with ? placeholders on SQLite. It fails on purpose, as
// RecordHandler does, when an event's data.fail is "transient" or
// "permanent" (the consumer then hands each event over alone).
func RecordBatchHandler(consumer string, postgres bool) seqbox.BatchHandler {
	return func(ctx context.Context, tx seqbox.Tx, evs []seqboxtype.Event) error {
		for _, ev := range evs {
			if err := failOnPurpose(ev); err != nil {
				return err
			}
		}
		objects := lastPerKey(evs)
		if postgres {
			return recordBatchPG(ctx, tx, consumer, evs, objects)
		}
		return recordBatchSQLite(ctx, tx, consumer, evs, objects)
	}
}

// lastPerKey is each partition key's last event of evs (a key's events
// come in version order), in byte order of the key: the order in which
// every writer locks object rows.
func lastPerKey(evs []seqboxtype.Event) []seqboxtype.Event {
	at := map[string]int{}
	var out []seqboxtype.Event
	for _, ev := range evs {
		if ev.PartitionKey == "" {
			continue
		}
		if i, ok := at[ev.PartitionKey]; ok {
			out[i] = ev
			continue
		}
		at[ev.PartitionKey] = len(out)
		out = append(out, ev)
	}
	slices.SortFunc(out, func(a, b seqboxtype.Event) int { return strings.Compare(a.PartitionKey, b.PartitionKey) })
	return out
}

func recordBatchPG(ctx context.Context, tx seqbox.Tx, consumer string, evs, objects []seqboxtype.Event) error {
	n := len(evs)
	source, id, key, typ, version := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]*int64, n)
	for i, ev := range evs {
		source[i], id[i], key[i], typ[i], version[i] = ev.Source, ev.ID, ev.PartitionKey, ev.Type, ev.ObjectVersion
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_record_effects (consumer, source, id, partitionkey, objectversion, type)
		SELECT $1, s, i, p, v, t FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[])
			WITH ORDINALITY AS u(s, i, p, v, t, n) ORDER BY n`,
		consumer, source, id, key, version, typ); err != nil {
		return fmt.Errorf("record effects: %w", err)
	}
	if len(objects) == 0 {
		return nil
	}
	m := len(objects)
	okey, otyp, over := make([]string, m), make([]string, m), make([]*int64, m)
	for i, ev := range objects {
		okey[i], otyp[i], over[i] = ev.PartitionKey, ev.Type, ev.ObjectVersion
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_record_objects (consumer, partitionkey, state, version)
		SELECT $1, p, t, v FROM unnest($2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS u(p, t, v, n) ORDER BY n
		ON CONFLICT (consumer, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`,
		consumer, okey, otyp, over); err != nil {
		return fmt.Errorf("record objects: %w", err)
	}
	return nil
}

// recordChunk is the most rows one SQLite statement carries (6 parameters
// each, far below SQLite's 32,766).
const recordChunk = 256

func recordBatchSQLite(ctx context.Context, tx seqbox.Tx, consumer string, evs, objects []seqboxtype.Event) error {
	for lo := 0; lo < len(evs); lo += recordChunk {
		part := evs[lo:min(len(evs), lo+recordChunk)]
		args := make([]any, 0, 6*len(part))
		for _, ev := range part {
			args = append(args, consumer, ev.Source, ev.ID, ev.PartitionKey, ev.ObjectVersion, ev.Type)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_record_effects (consumer, source, id, partitionkey, objectversion, type) VALUES `+
			groups("(?, ?, ?, ?, ?, ?)", len(part)), args...); err != nil {
			return fmt.Errorf("record effects: %w", err)
		}
	}
	for lo := 0; lo < len(objects); lo += recordChunk {
		part := objects[lo:min(len(objects), lo+recordChunk)]
		args := make([]any, 0, 4*len(part))
		for _, ev := range part {
			args = append(args, consumer, ev.PartitionKey, ev.Type, ev.ObjectVersion)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_record_objects (consumer, partitionkey, state, version) VALUES `+
			groups("(?, ?, ?, ?)", len(part))+
			` ON CONFLICT (consumer, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`, args...); err != nil {
			return fmt.Errorf("record objects: %w", err)
		}
	}
	return nil
}

// groups is n copies of group, comma-separated.
func groups(group string, n int) string {
	return strings.TrimSuffix(strings.Repeat(group+", ", n), ", ")
}

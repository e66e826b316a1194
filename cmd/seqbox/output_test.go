package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every operator command speaks one format: tables and sentences for
// people, one JSON document with --output json, one object a line with
// --output jsonl (the older --json). An action prints a sentence.
func TestOutputFormats(t *testing.T) {
	t.Parallel()
	db := replayK2(t)
	for _, args := range [][]string{
		{"dlq", "list"}, {"dlq", "list", "--all"}, {"keys", "list"}, {"keys", "list", "--all"},
		{"effects", "list", "--consumer", "replay"}, {"consumers", "list"},
	} {
		var rows []map[string]any
		out := ok(t, append(args, "--db", db, "--output", "json")...)
		require.NoError(t, json.Unmarshal([]byte(out), &rows), "seqbox %s --output json: %s", strings.Join(args, " "), out)
		lines := ok(t, append(args, "--db", db, "-o", "jsonl")...)
		require.Equal(t, len(rows), strings.Count(lines, "\n"), "one object a line, as many as the array holds: %s", lines)
	}
	var show map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "dlq", "show", "1", "--db", db, "-o", "json")), &show))
	require.Equal(t, "k2-v2", show["id"])
	var key map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "keys", "show", "K2", "--db", db, "-o", "json")), &key), "one document")
	require.Equal(t, "K2", key["partitionkey"])
	require.Len(t, key["parked"], 1)

	var cs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "consumers", "list", "--db", db, "-o", "json")), &cs))
	require.Len(t, cs, 1)
	require.Equal(t, []any{"replay", "record", false}, []any{cs[0]["name"], cs[0]["handler_kind"], cs[0]["live"]})
	require.Equal(t, "block", cs[0]["policies"].(map[string]any)["on_dead_letter"])
	require.True(t, strings.HasPrefix(ok(t, "consumers", "list", "--db", db), "NAME    HANDLER  PROCESS"))
	require.True(t, strings.HasPrefix(ok(t, "consumers", "list", "--db", db, "--consumer", "replay"), "NAME    HANDLER  PROCESS"))
	require.Equal(t, `seqbox: --consumer "nobody": no such consumer in `+db+`; it has "replay"`,
		fails(t, "consumers", "list", "--db", db, "--consumer", "nobody"), "an unknown consumer is named, as every command names it")

	// An action: a sentence, or one JSON object.
	r := exe(t, "", "dlq", "redrive", "1", "--db", db)
	require.Equal(t, 1, r.code, "failed again: %s", r.stderr)
	require.Regexp(t, `^redrive of dead letter 1 ran, and failed again \(request \d+\): crm/k2-v2 dead_lettered \(permanent failure: .*\)\n$`, r.stdout)
	r = exe(t, "", "dlq", "redrive", "1", "--db", db, "--output", "json")
	var acted struct {
		Action, Target string
		Request        int64
		Results        []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &acted), r.stdout)
	require.Equal(t, []any{"redrive", "1", "dead_lettered"}, []any{acted.Action, acted.Target, acted.Results[0]["outcome"]})
	require.Positive(t, acted.Request)
	require.Equal(t, lines(`skip of dead letter 1 done (request 3): crm/k2-v3 applied`),
		ok(t, "dlq", "skip", "1", "--by", "ana", "--reason", "refunded by hand", "--db", db))

	// Bad formats are named.
	require.Equal(t, `seqbox: --output "yaml": want text, json or jsonl`, fails(t, "dlq", "list", "--db", db, "--output", "yaml"))
	require.Equal(t, `seqbox: --json is --output jsonl: it cannot go with --output json`, fails(t, "dlq", "list", "--db", db, "--json", "-o", "json"))
	require.Equal(t, "[]\n", ok(t, "dlq", "list", "--db", db, "-o", "json"), "an empty list is an empty array")
}

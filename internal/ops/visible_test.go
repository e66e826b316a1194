package ops

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// JSON lines escape what would not show as itself, and still decode to
// the same strings.
func TestJSONEncoderEscapesHiddenCharacters(t *testing.T) {
	in := map[string]string{"id": "g3K\u202eevil", "key": "zero\u200bwidth", "tag": "x\U000e0001y", "ok": "é 😀 tab\t"}
	var buf bytes.Buffer
	require.NoError(t, NewJSONEncoder(&buf).Encode(in))
	out := buf.String()
	for _, raw := range []string{"\u202e", "\u200b", "\U000e0001"} {
		require.NotContains(t, out, raw)
	}
	require.Contains(t, out, `g3K\u202eevil`)
	require.Contains(t, out, `x\udb40\udc01y`)
	require.Contains(t, out, "é 😀", "visible characters stay as they are")
	var back map[string]string
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	require.Equal(t, in, back)
}

// dlq show prints the envelope for people: a terminal control sequence in
// it is escaped, not sent to the terminal.
func TestDeadLetterEnvelopeIsEscaped(t *testing.T) {
	var buf bytes.Buffer
	env := []byte("{\"id\":\"\x1b[2J\u202e\"}")
	require.NoError(t, WriteDeadLetter(&buf, store.DeadLetter{Seq: 1, Envelope: env}))
	out := buf.String()
	require.NotContains(t, out, "\x1b")
	require.NotContains(t, out, "\u202e")
	require.True(t, strings.HasSuffix(out, `{"id":"\u001b[2J\u202e"}`+"\n"), out)
}

// A pasted command keeps an argument that looks like a flag an argument.
func TestCommandPutsDashArgumentsAfterDoubleDash(t *testing.T) {
	require.Equal(t, "seqbox keys release K-1 --by WHO", command("seqbox keys release", "K-1", " --by WHO"))
	require.Equal(t, "seqbox keys release --by WHO -- -dash", command("seqbox keys release", "-dash", " --by WHO"))
	require.Equal(t, "seqbox keys release --by WHO -- '-a b'", command("seqbox keys release", "-a b", " --by WHO"))
}

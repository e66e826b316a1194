package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A token's MAC covers the payload hash it carries (docs/design.md §16):
// a token of one event whose hash part is changed to another copy's is
// not one the gateway issued (403), whatever the event's turn says.
func TestEffectsTokenCoversThePayloadHash(t *testing.T) {
	k := &tokens{key: []byte(strings.Repeat("k", 32))}
	token := k.mint("gateway", "crm", "e1", "hash-a")
	hash, err := k.check(token, "gateway", "crm", "e1")
	require.NoError(t, err)
	require.Equal(t, "hash-a", hash)
	forged := strings.Replace(token, ".hash-a.", ".hash-b.", 1)
	require.NotEqual(t, token, forged)
	_, err = k.check(forged, "gateway", "crm", "e1")
	require.ErrorIs(t, err, errTokenForeign, "a token whose payload hash was changed was accepted")
	_, err = k.check(token, "gateway", "crm", "e2")
	require.ErrorIs(t, err, errTokenForeign, "a token opened another event")
}

package serve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox/store"
)

// HeaderEffectsToken carries, on every agent call, the capability for
// that one event's steps and effects (docs/agents.md).
const HeaderEffectsToken = "Seqbox-Effects-Token"

// effectsTokenSecret names the HMAC key in seqbox_gateway_secrets.
const effectsTokenSecret = "effects-token"

// tokenVersion starts every token, so that another format can come later.
const tokenVersion = "v1"

// tokens mints and checks Seqbox-Effects-Token values. A token is
// "v1.<payload hash>.<MAC>", the MAC an HMAC-SHA256, under a 32-byte key
// drawn from crypto/rand and kept in the database, of the event's
// consumer, source, id and payload hash: every serve process on the
// database, and every restart, mints the same token for the same event
// and checks any of them. It grants nothing by itself: a request with it
// is served only while the event holds its key's turn with that payload
// hash (its outcome is not final), which the caller checks
// (Server.agentEvent).
type tokens struct {
	key []byte
}

// loadTokens reads the HMAC key from the store, keeping a fresh one from
// crypto/rand when the database has none yet.
func loadTokens(ctx context.Context, ex store.Executor, now time.Time) (*tokens, error) {
	candidate := make([]byte, 32)
	if _, err := rand.Read(candidate); err != nil {
		return nil, fmt.Errorf("draw the effects token key: %w", err)
	}
	secret, err := ex.GatewaySecret(ctx, store.GatewaySecretParams{Name: effectsTokenSecret, Candidate: hex.EncodeToString(candidate), At: now})
	if err != nil {
		return nil, fmt.Errorf("read the effects token key: %w", err)
	}
	key, err := hex.DecodeString(secret)
	if err != nil || len(key) < 32 {
		return nil, errors.New("the effects token key kept in seqbox_gateway_secrets is not 32 bytes of hex")
	}
	return &tokens{key: key}, nil
}

// mac is the HMAC of an event's identity and payload hash, each part
// length-prefixed so that no two inputs share it.
func (t *tokens) mac(consumer, source, id, hash string) []byte {
	m := hmac.New(sha256.New, t.key)
	for _, s := range []string{consumer, source, id, hash} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	return m.Sum(nil)
}

// mint is the token of one event.
func (t *tokens) mint(consumer, source, id, hash string) string {
	return tokenVersion + "." + hash + "." + base64.RawURLEncoding.EncodeToString(t.mac(consumer, source, id, hash))
}

// errTokenForeign: the token was not minted for this event.
var errTokenForeign = errors.New("the Seqbox-Effects-Token was not issued for this event (consumer, source, id): a token opens only the steps and effects of the event it came with")

// check verifies that token was minted for the event (consumer, source,
// id), and returns the payload hash it is bound to.
func (t *tokens) check(token, consumer, source, id string) (hash string, err error) {
	version, rest, ok := strings.Cut(token, ".")
	if !ok || version != tokenVersion {
		return "", errTokenForeign
	}
	hash, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return "", errTokenForeign
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !hmac.Equal(got, t.mac(consumer, source, id, hash)) {
		return "", errTokenForeign
	}
	return hash, nil
}

package serve

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The ingest token, like the admin token, is at least 16 characters, and
// a shorter one is refused naming its flag.
func TestValidateTokenLengths(t *testing.T) {
	for _, c := range []struct {
		opt  Options
		flag string
	}{
		{Options{IngestToken: "x"}, "--ingest-token"},
		{Options{IngestToken: strings.Repeat("x", MinTokenLength-1)}, "--ingest-token"},
		{Options{AdminToken: strings.Repeat("x", MinTokenLength-1)}, "--admin-token"},
	} {
		err := c.opt.Validate()
		require.Error(t, err, "%+v", c.opt)
		require.True(t, strings.HasPrefix(err.Error(), c.flag+": "), "%v", err)
		require.Contains(t, err.Error(), "16 characters")
	}
	require.NoError(t, Options{IngestToken: strings.Repeat("x", MinTokenLength)}.Validate())
	require.NoError(t, Options{AdminToken: strings.Repeat("x", MinTokenLength), IngestToken: strings.Repeat("y", MinTokenLength)}.Validate())
	require.NoError(t, Options{}.Validate(), "no ingest token: ingest is open, as before")

	// New refuses a short ingest token too: nothing is opened.
	_, err := New(t.Context(), Options{DB: t.TempDir() + "/s.db", IngestToken: "short"})
	require.ErrorContains(t, err, "--ingest-token")
}

func TestValidateRefusesNegativeAgentSettings(t *testing.T) {
	require.ErrorContains(t, Options{AgentConcurrency: -1}.Validate(), "--agent-concurrency -1: at least 1")
	require.ErrorContains(t, Options{AgentTimeout: -time.Second}.Validate(), "must not be negative")
}

// An empty address is the loopback default, both where Validate checks
// it and where the command listens: `serve --addr ”` listened on every
// interface with no admin token, after Validate had passed the default.
func TestAnEmptyAddressListensOnTheLoopbackDefault(t *testing.T) {
	o := Options{Addr: ""}
	require.NoError(t, o.Validate())
	require.Equal(t, DefaultAddr, o.ListenAddr())
	require.NoError(t, CheckAddr(o.ListenAddr(), false), "loopback: no token needed")
	require.Equal(t, "0.0.0.0:9000", Options{Addr: "0.0.0.0:9000"}.ListenAddr(), "a given address as given")
	require.ErrorIs(t, Options{Addr: ":9000"}.Validate(), ErrNonLoopbackWithoutToken)
}

package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// childEnv makes the test binary a relay process over the SQLite file it
// names (see relayChild).
const childEnv = "SEQBOX_OUTBOX_RELAY_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		if err := relayChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "relay child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// relayChild relays the outbox of the database at path to its queue until
// nothing is left, dying with SIGKILL where SEQBOX_FAULT says.
func relayChild(path string) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer st.Close()
	q, err := embedded.Open(ctx, path, embedded.Config{Name: "downstream"})
	if err != nil {
		return err
	}
	defer q.Close()
	hook, err := fault.FromEnv()
	if err != nil {
		return err
	}
	r, err := outbox.NewRelay(own.Wrap(st, own.Options{Hook: hook}), q, outbox.Config{Batch: 8, Parallel: 3, Lease: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	// Rounds until the outbox is empty. A round publishes nothing while
	// a killed relay's lease is still running: poll until one does (the
	// lease ran out and this relay took it) or nothing is left.
	for {
		var n, waiting int
		var err error
		progressed := waitfor.Until(time.Minute, func() bool {
			if n, err = r.RunOnce(ctx); err != nil || n > 0 {
				return true
			}
			waiting, _, err = r.Pending(ctx)
			return err != nil || waiting == 0
		})
		switch {
		case !progressed:
			return fmt.Errorf("%d events still waiting after a minute of rounds that published nothing", waiting)
		case err != nil:
			return err
		case n == 0:
			return nil // nothing waiting
		}
	}
}

// runChild runs a relay process; fault empty means it must finish.
func runChild(t *testing.T, path, point string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path, fault.Env+"="+point)
	out, err := cmd.CombinedOutput()
	if point == "" {
		require.NoError(t, err, "relay process: %s", out)
		return
	}
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the relay was to die at %s: %v %s", point, err, out)
	ws := exit.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by SIGKILL at %s: %v %s", point, err, out)
}

// A relay killed at each point of its round, then restarted, leaves the
// downstream consumer with every event applied once, in order: events
// published but not marked are published again with the same id, and the
// downstream inbox takes them as duplicates.
func TestRelayKilledAtEachPoint(t *testing.T) {
	for _, tc := range []struct {
		point string
		dups  bool // republications must reach the downstream inbox
	}{
		{string(fault.RelayAfterPublish) + ":1", true},
		{string(fault.RelayAfterPublish) + ":3", true},
		{string(fault.RelayAfterMark) + ":2", false},
	} {
		t.Run(tc.point, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seqbox.db")
			up := openStage(t, path)
			emitAll(t, up, 4, 10)
			runChild(t, path, tc.point)
			runChild(t, path, "")
			q := openQueue(t, path)
			got, dups := downstream(t, up, q)
			exactlyOnce(t, got, 4, 10)
			if tc.dups {
				require.Positive(t, dups, "the events published before the kill were published again")
			} else {
				require.Zero(t, dups)
			}
			t.Logf("duplicates recognised downstream: %d", dups)
		})
	}
}

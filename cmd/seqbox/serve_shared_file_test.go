package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// An operator reads serve's SQLite file with another tool while serve
// runs (here Python's sqlite3, the system's libsqlite3 as the sqlite3
// shell uses), then serve is SIGKILLed: every event answered 202, before
// the read and after it, is still in the file. serve used to hold no lock
// on its file (its second pool's header read dropped them): the tool's
// clean close took itself for the last, deleted the -wal under serve,
// and what serve accepted afterwards went to an unlinked -wal that the
// SIGKILL lost (docs/design.md §15.1).
func TestServeKeepsWhatItAcceptedAfterAnotherToolReadTheFile(t *testing.T) {
	pastetest.Need(t, "another process with the system's SQLite", "python3")
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.Transport.(*http.Transport).CloseIdleConnections()
	post := func(id string) {
		body := `{"specversion":"1.0","id":"` + id + `","source":"crm","type":"t","partitionkey":"k-` + id + `"}`
		resp, err := client.Post(s.url+"/v1/events", "application/cloudevents+json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode, id)
	}
	accepted := func() string {
		t.Helper()
		out, err := exec.Command("python3", "-c", `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(",".join(r[0] for r in c.execute("SELECT id FROM seqbox_gateway_accepted ORDER BY id")))
c.close()`, db).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}

	post("e1")
	require.Equal(t, "e1", accepted())
	require.FileExists(t, db+"-wal", "the tool's close deleted the -wal under serve")
	for i := 2; i <= 5; i++ {
		post(fmt.Sprint("e", i))
	}
	require.Equal(t, "e1,e2,e3,e4,e5", accepted(), "another process sees what serve committed")
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	<-s.done

	st, err := dbopen.StoreAccess(context.Background(), db, store.ReadOnly)
	require.NoError(t, err)
	defer st.Close()
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_gateway_accepted`).Scan(&n))
	require.Equal(t, 5, n, "every event answered 202 survives the SIGKILL")
}

package serve

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite" // the other process's connection
)

// Issue 36, class 11: while every ingest answers 503 because the events
// cannot be queued durably (a full disk: reads still answer, writes to
// the queue fail; here another process's trigger refuses them the same
// way), /readyz must not say ready; once an ingest queues again, it is.
func TestReadyzFailsWhileIngestCannotQueue(t *testing.T) {
	db := filepath.Join(t.TempDir(), "seqbox.db")
	r := start(t, Options{DB: db})
	ready := func() (int, string) {
		code, body, _ := r.call(t, "GET", "/readyz", "", nil, "")
		checks, _ := body["checks"].(map[string]any)
		detail, _ := body["detail"].(string)
		return code, strings.TrimSpace(detail + " " + anyString(checks["ingest"]))
	}
	code, _ := ready()
	require.Equal(t, http.StatusOK, code)

	other, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Exec(`CREATE TRIGGER disk_full BEFORE INSERT ON seqbox_queue BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`)
	require.NoError(t, err)
	code, _, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"e1","source":"crm","type":"t"}`)
	require.Equal(t, http.StatusServiceUnavailable, code, "the event cannot be queued")
	code, detail := ready()
	require.Equal(t, http.StatusServiceUnavailable, code, "ready while every ingest fails: %s", detail)
	require.Contains(t, detail, "ingest")

	_, err = other.Exec(`DROP TRIGGER disk_full`)
	require.NoError(t, err)
	code, _, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"e1","source":"crm","type":"t"}`)
	require.Equal(t, http.StatusAccepted, code)
	code, detail = ready()
	require.Equal(t, http.StatusOK, code, detail)
}

func anyString(v any) string {
	s, _ := v.(string)
	return s
}

package main

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// The program's output, run in a fresh directory: the late version 41 is
// refused as stale and changes nothing.
func TestCRMTask(t *testing.T) {
	t.Chdir(t.TempDir())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	if _, err := io.Copy(&out, r); err != nil {
		t.Fatal(err)
	}
	want := `evt-482 attempt 1: retry
evt-483 attempt 1: applied
evt-482 attempt 2: applied
evt-482 attempt 1: duplicate
ledger: crm.create_task for evt-482 succeeded, task task-opp-2481-1, uncertain once: true
ledger: crm.create_task for evt-483 succeeded, task task-opp-2482-1, uncertain once: false
tasks in the CRM: 2, after 2 requests
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

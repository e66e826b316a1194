package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// The program's output, run in a fresh directory: the call whose answer
// was lost is uncertain once, reconciled through its idempotency key, and
// the CRM holds one task per event. evt-482 and evt-483 are two keys,
// decided at once, so their outcome lines may interleave either way; each
// event's own lines keep their order.
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
	wantOutcomes := map[string][]string{
		"evt-482": {"evt-482 attempt 1: retry", "evt-482 attempt 2: applied", "evt-482 attempt 1: duplicate"},
		"evt-483": {"evt-483 attempt 1: applied"},
	}
	wantRest := `ledger: crm.create_task for evt-482 succeeded, task task-opp-2481-1, uncertain once: true
ledger: crm.create_task for evt-483 succeeded, task task-opp-2482-1, uncertain once: false
tasks in the CRM: 2, after 2 requests
`
	lines := strings.SplitAfter(out.String(), "\n")
	outcomes := map[string][]string{}
	i := 0
	for ; i < len(lines) && strings.HasPrefix(lines[i], "evt-"); i++ {
		id, _, _ := strings.Cut(lines[i], " ")
		outcomes[id] = append(outcomes[id], strings.TrimSuffix(lines[i], "\n"))
	}
	rest := strings.Join(lines[i:], "")
	if len(outcomes) != len(wantOutcomes) || rest != wantRest {
		t.Fatalf("output:\n%s\nwant the outcomes %v, then:\n%s", out.String(), wantOutcomes, wantRest)
	}
	for id, want := range wantOutcomes {
		if strings.Join(outcomes[id], "\n") != strings.Join(want, "\n") {
			t.Fatalf("output:\n%s\n%s's outcomes are %q, want %q in this order", out.String(), id, outcomes[id], want)
		}
	}
}

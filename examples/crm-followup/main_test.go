package main

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// The program's output, run in a fresh directory: the late version 41 is
// refused as stale and changes nothing.
func TestFollowUp(t *testing.T) {
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
	want := `evt-41    v41: applied
evt-42    v42: applied
evt-43    v43: applied
sync-7731 v41: stale (version 41 is older than the committed version 43)
follow-up for opp-2481: closed at version 43; notes to the seller: 1
audit: sync-7731 stale received v41, current v43: version 41 is older than the committed version 43; next: none: a newer version is already committed
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

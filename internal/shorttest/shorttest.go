// Package shorttest leaves the slow suites (the chaos harness, the
// in-process brokers and what runs over them) out of `go test -short`, a
// developer's quick run. CI never passes -short, so it runs them all.
package shorttest

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// SkipMain reports whether -short leaves the suite of this TestMain out,
// and says so; the caller then returns without running m:
//
//	func TestMain(m *testing.M) {
//		if shorttest.SkipMain("the NATS broker suite") {
//			return
//		}
//		goleak.VerifyTestMain(m)
//	}
func SkipMain(suite string) bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		return false
	}
	fmt.Fprintf(os.Stdout, "-short: skipping %s (run without -short, as CI does, to include it)\n", suite)
	return true
}

// Skip skips t under -short, naming the slow suite it belongs to.
func Skip(t testing.TB, suite string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: skipping %s (run without -short, as CI does, to include it)", suite)
	}
}

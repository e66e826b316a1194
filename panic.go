package seqbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/seqbox/seqbox/seqboxtype"
)

// PanicError is a panic in a Handler, BatchHandler or Decider, recovered
// and turned into a permanent failure of its message. Its Error is one
// line (the panic's value and the place it happened), as the DLQ, the
// audit and the CLI show it; Stack holds the goroutine's stack for the
// log.
type PanicError struct {
	// What panicked: "handler" or "decide".
	What string
	// Value is the value passed to panic.
	Value any
	// At is the function, file and line that panicked.
	At string
	// Stack is the goroutine's stack at the recovery.
	Stack []byte
}

// Error implements error: What, the panic's value on one line, and At
// when known ("handler panicked: boom (at main.apply main.go:12)").
func (e *PanicError) Error() string {
	msg := strings.Join(strings.Fields(fmt.Sprint(e.Value)), " ")
	if e.At == "" {
		return e.What + " panicked: " + msg
	}
	return e.What + " panicked: " + msg + " (at " + e.At + ")"
}

// recovered is the permanent error of a panic with value r in what,
// called from the deferred function that recovered it.
func recovered(what string, r any) error {
	return Permanent(&PanicError{What: what, Value: r, At: panicSite(), Stack: debug.Stack()})
}

// panicSite is the first frame below runtime.gopanic on the recovering
// goroutine: the code that panicked (or, for a runtime error, the code
// whose operation failed).
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	afterPanic := false
	for {
		f, more := frames.Next()
		if afterPanic && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line)
		}
		if f.Function == "runtime.gopanic" {
			afterPanic = true
		}
		if !more {
			return ""
		}
	}
}

// logPanic logs the stack of a recovered panic once, where the DLQ and the
// audit keep only its one line.
func logPanic(cfg Config, ev seqboxtype.Event, err error) {
	var pe *PanicError
	if errors.As(err, &pe) {
		cfg.Logger.Error("seqbox: "+pe.What+" panicked; the message fails for good", "consumer", cfg.Name,
			"source", ev.Source, "id", ev.ID, "panic", pe.Error(), "stack", string(pe.Stack))
	}
}

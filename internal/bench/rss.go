package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// rssWindow measures the resident set of this process over one stretch
// of work, from /proc/self/status (Linux): VmRSS when the window opens,
// after a GC that returns the free heap to the OS, and VmHWM (the peak
// resident set) when it closes. Opening the window resets VmHWM to the
// current VmRSS by writing 5 to /proc/self/clear_refs (Linux 4.0+), so
// the peak belongs to the window and not to earlier work in the process.
type rssWindow struct {
	// ok: /proc/self/status was readable; reset: VmHWM was reset.
	ok, reset bool
	// baseKB is VmRSS when the window opened.
	baseKB int64
}

// openRSS opens a window. Where /proc/self/status is missing, the
// window measures nothing (ok is false).
func openRSS() rssWindow {
	debug.FreeOSMemory()
	var w rssWindow
	w.reset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	st, err := procStatus()
	if err != nil {
		return w
	}
	w.ok = true
	w.baseKB = st["VmRSS"]
	return w
}

// rssUse is what a window measured, in kB.
type rssUse struct {
	// Known: the window measured; Windowed: the peak is the window's own
	// (VmHWM was reset), not the whole process's since it started.
	Known, Windowed bool
	Base, Peak      int64
}

// close reads the peak. Without the reset, the peak is the process's
// since it started, which may predate the window.
func (w rssWindow) close() rssUse {
	if !w.ok {
		return rssUse{}
	}
	st, err := procStatus()
	if err != nil {
		return rssUse{}
	}
	return rssUse{Known: true, Windowed: w.reset, Base: w.baseKB, Peak: st["VmHWM"]}
}

// Increase is the peak over the resident set the window started with.
func (u rssUse) Increase() int64 { return max(0, u.Peak-u.Base) }

// Source says where the figures come from.
func (u rssUse) Source() string {
	switch {
	case !u.Known:
		return "not measured: no /proc/self/status on this system"
	case u.Windowed:
		return "VmHWM of /proc/self/status, reset through /proc/self/clear_refs as the run starts, so the peak is the run's; baseline = VmRSS then, after a GC returned free heap to the OS"
	}
	return "VmHWM of /proc/self/status, which could not be reset: the peak is the process's since it started, and may predate the run"
}

// mb prints kB as MiB, or "-" when not measured.
func (u rssUse) mb(kb int64) string {
	if !u.Known {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(kb)/1024)
}

// procStatus reads the kB figures of /proc/self/status.
func procStatus() (map[string]int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(v)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[k] = n
		}
	}
	if _, ok := out["VmHWM"]; !ok {
		return nil, fmt.Errorf("no VmHWM in /proc/self/status")
	}
	return out, nil
}

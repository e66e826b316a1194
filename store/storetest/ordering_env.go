package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
)

// ---------------------------------------------------------------------------
// helpers (prefixed ord so they cannot clash with the inbox suite)

// ordT0 is the scenarios' fixed start time (the seed's PED-4821 day).
var ordT0 = time.Date(2026, 9, 25, 12, 0, 0, 0, time.UTC)

const ordSource = "erp_pedidos"

// ordLog collects what consumers log, for the alerts a scenario expects.
type ordLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *ordLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *ordLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// ordAttr adjusts an envelope.
type ordAttr func(map[string]any)

func ordWithSource(s string) ordAttr { return func(m map[string]any) { m["source"] = s } }
func ordWithTime(t time.Time) ordAttr {
	return func(m map[string]any) { m["time"] = t.UTC().Format(time.RFC3339) }
}
func ordWithData(d map[string]any) ordAttr { return func(m map[string]any) { m["data"] = d } }
func ordWithAttr(k string, v any) ordAttr  { return func(m map[string]any) { m[k] = v } }
func ordFailPermanent() ordAttr            { return ordWithData(map[string]any{"fail": "permanent"}) }

// ordEvent builds a structured-mode CloudEvent for key at version (an
// int, an int64 or a string; nil for none).
func ordEvent(id, key string, version any, typ string, attrs ...ordAttr) []byte {
	m := map[string]any{"specversion": "1.0", "id": id, "source": ordSource, "type": typ}
	if key != "" {
		m["partitionkey"] = key
	}
	if version != nil {
		m["objectversion"] = version
	}
	for _, a := range attrs {
		a(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return raw
}

func ordV(v int64) *int64 { return &v }

// ordSummary renders results as "id:outcome".
func ordSummary(results []seqboxtype.Result) []string {
	out := make([]string, len(results))
	for i, res := range results {
		out[i] = res.ID + ":" + string(res.Outcome)
	}
	return out
}

func ordVer(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// ordHandler wraps the record handler to fail chosen identities on
// purpose: permanently until fixed, or transiently on their first attempt.
type ordHandler struct {
	mu            sync.Mutex
	next          seqbox.Handler
	permanent     map[string]bool
	transientOnce map[string]bool
	calls         map[string]int
}

func newOrdHandler(consumer string) *ordHandler {
	return &ordHandler{next: replay.RecordHandler(consumer), permanent: map[string]bool{},
		transientOnce: map[string]bool{}, calls: map[string]int{}}
}

func (h *ordHandler) failPermanently(id string) { h.mu.Lock(); h.permanent[id] = true; h.mu.Unlock() }
func (h *ordHandler) fix(id string)             { h.mu.Lock(); delete(h.permanent, id); h.mu.Unlock() }
func (h *ordHandler) failOnce(id string)        { h.mu.Lock(); h.transientOnce[id] = true; h.mu.Unlock() }

func (h *ordHandler) handle(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	h.mu.Lock()
	h.calls[ev.ID]++
	perm := h.permanent[ev.ID]
	once := h.transientOnce[ev.ID]
	delete(h.transientOnce, ev.ID)
	h.mu.Unlock()
	if perm {
		return seqbox.Permanent(fmt.Errorf("ordering test: %s is broken", ev.ID))
	}
	if once {
		return fmt.Errorf("ordering test: %s failed transiently", ev.ID)
	}
	return h.next(ctx, tx, ev)
}

// ordCrasher is a Config.Faults hook that crashes once at an armed point.
type ordCrasher struct {
	mu    sync.Mutex
	point fault.Point
	fired int
}

func (c *ordCrasher) arm(p fault.Point) { c.mu.Lock(); c.point = p; c.mu.Unlock() }

func (c *ordCrasher) hook(p fault.Point) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.point != "" && p == c.point {
		c.point = ""
		c.fired++
		return fmt.Errorf("ordering test at %s: %w", p, fault.ErrCrash)
	}
	return nil
}

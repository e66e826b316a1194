package ops

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/seqbox/seqbox/store"
)

// ConsumerLine is one registered consumer in `seqbox consumers list` and
// the admin API's GET /v1/admin/consumers: its name, handler kind and
// policies, the process that registered last, and its heartbeat. Live
// says whether that heartbeat is recent (within liveWithin).
type ConsumerLine struct {
	Name        string          `json:"name"`
	HandlerKind string          `json:"handler_kind"`
	Policies    json.RawMessage `json:"policies"`
	Process     string          `json:"process"`
	StartedAt   *string         `json:"started_at"`
	HeartbeatAt *string         `json:"heartbeat_at"`
	Live        bool            `json:"live"`
}

// ConsumerLineOf is r as a ConsumerLine at now. Its policies are the
// registered object, {} when it registered none.
func ConsumerLineOf(r store.Registration, now time.Time, liveWithin time.Duration) ConsumerLine {
	pol := json.RawMessage(`{}`)
	if len(r.Policies) > 0 && json.Valid(r.Policies) {
		pol = json.RawMessage(r.Policies)
	}
	return ConsumerLine{Name: r.Consumer, HandlerKind: r.HandlerKind, Policies: pol, Process: r.Process,
		StartedAt: jsonTime(r.StartedAt), HeartbeatAt: jsonTime(r.HeartbeatAt),
		Live: !r.HeartbeatAt.IsZero() && now.Sub(r.HeartbeatAt) < liveWithin}
}

// WriteConsumers prints consumers by name: a table, or JSON.
func WriteConsumers(w io.Writer, cs []ConsumerLine, out Format) error {
	if out.Structured() {
		return WriteRows(w, out, cs)
	}
	t := newTable(w, "NAME", "HANDLER", "PROCESS", "STARTED_AT", "HEARTBEAT_AT", "LIVE")
	for _, c := range cs {
		t.row(c.Name, c.HandlerKind, c.Process, stampText(c.StartedAt), stampText(c.HeartbeatAt), strconv.FormatBool(c.Live))
	}
	return t.flush()
}

// stampText shows a JSON time as the tables do (seconds, UTC).
func stampText(s *string) string {
	if s == nil {
		return ""
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return *s
	}
	return timeText(t)
}

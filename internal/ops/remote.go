package ops

import (
	"fmt"
	"time"
)

// FromServer makes a key report decoded from a gateway's admin API (the
// JSON the Reporter's report carries) print as the database path prints
// it: the times that only travel as text are read back, and the advice
// of a blocked key names the gateway (--server URL) instead of the
// gateway's own --db and --consumer, so it can be pasted where the
// report was read.
func (r *KeyReport) FromServer(server string) error {
	var err error
	if r.since, err = parseJSONTime("since", r.Since); err != nil {
		return err
	}
	if r.holdUntil, err = parseJSONTime("hold_until", r.HoldUntil); err != nil {
		return err
	}
	if r.Blocked {
		r.Action = blockedAction(*r, " --server "+shellWord(server))
	}
	return nil
}

// parseJSONTime reads a time jsonTime wrote; nil is the zero time.
func parseJSONTime(field string, s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, fmt.Errorf("key report: %s %q: %w", field, *s, err)
	}
	return t, nil
}

package seqbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/seqbox/seqbox/store"
)

// HeartbeatEvery is how often Run refreshes a consumer's heartbeat.
const HeartbeatEvery = 5 * time.Second

// LiveWithin is how recent a heartbeat must be for a consumer to count as
// running: three missed heartbeats and it is presumed gone.
const LiveWithin = 3 * HeartbeatEvery

// Policies are how a consumer orders, retries and retains: the part of its
// Config (embedded there) that every consumer of one name must share,
// since they compete for one inbox. A consumer registers them in its
// database (seqbox_consumers), so that operator commands know them
// without being told (RegisteredPolicies), and a live consumer of the
// same name with other policies is refused (ErrPolicyConflict). A policy
// left zero takes its DefaultPolicies value.
//
// Each registered policy carries its name in the registration as a
// `policy` tag; Retry's backoffs are not registered.
type Policies struct {
	// GapPolicy decides what a version gap does. Default GapHold.
	GapPolicy GapPolicy `policy:"gap_policy"`
	// HoldTimeout bounds a hold. Default 5m.
	HoldTimeout time.Duration `policy:"hold_timeout"`
	// HoldExpiry decides what a hold that timed out does. Default block.
	HoldExpiry HoldExpiry `policy:"hold_expiry"`
	// FirstVersion, when set, is the version every new key must start at;
	// otherwise a key's first version seen is its baseline.
	FirstVersion *int64 `policy:"first_version"`
	// OnDeadLetter decides what a dead-lettered ordered message does to its
	// successors. Default block.
	OnDeadLetter DeadLetterPolicy `policy:"on_dead_letter"`
	// MaxBlock bounds how long a key may stay blocked before the key is
	// released with a recorded gap and an alert. Zero: no bound.
	MaxBlock time.Duration `policy:"max_block"`
	// MaxAge is the business deadline: an event whose time is older than
	// MaxAge is expired. Zero: no deadline.
	MaxAge time.Duration `policy:"max_age"`
	// Retry bounds transient failures.
	Retry RetryPolicy

	// Retention is how long inbox identities are kept. Default 30 days.
	Retention time.Duration `policy:"retention"`
	// RedeliveryWindow is the longest the broker may redeliver a message.
	// Default 14 days (the longest SQS retention).
	RedeliveryWindow time.Duration `policy:"redelivery_window"`
	// DLQRetention is the longest a dead letter waits for its redrive
	// (in seqbox's DLQ or the broker's). Default 14 days. Retention must
	// cover DLQRetention plus RedriveWindow: a dead-lettered message can
	// come back that long after it failed.
	DLQRetention time.Duration `policy:"dlq_retention"`
	// RedriveWindow is how long a redriven message may take to arrive
	// after its dead letter's retention. Default 1 day.
	RedriveWindow time.Duration `policy:"redrive_window"`
}

// DefaultPolicies are the policies a Config leaves zero take
// (Config.WithDefaults), and the defaults of the CLI's policy flags.
func DefaultPolicies() Policies {
	return Policies{
		GapPolicy:        GapHold,
		HoldTimeout:      5 * time.Minute,
		HoldExpiry:       HoldExpiryBlock,
		OnDeadLetter:     DeadLetterBlock,
		Retry:            RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute},
		Retention:        30 * 24 * time.Hour,
		RedeliveryWindow: 14 * 24 * time.Hour,
		DLQRetention:     14 * 24 * time.Hour,
		RedriveWindow:    24 * time.Hour,
	}
}

// withDefaults returns p with every policy left zero (or negative) at
// its DefaultPolicies value.
func (p Policies) withDefaults() Policies {
	def := DefaultPolicies()
	var fill func(v, d reflect.Value)
	fill = func(v, d reflect.Value) {
		switch {
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), d.Field(i))
			}
		case v.IsZero(), v.CanInt() && v.Int() < 0:
			v.Set(d)
		}
	}
	fill(reflect.ValueOf(&p).Elem(), reflect.ValueOf(def))
	return p
}

// registeredPolicy is one policy as a registration records it: its name
// (the field's policy tag) and the field.
type registeredPolicy struct {
	name string
	v    reflect.Value
}

// registered lists p's registered policies in their order, addressing p's
// fields.
func (p *Policies) registered() []registeredPolicy {
	var out []registeredPolicy
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			if name, ok := v.Type().Field(i).Tag.Lookup("policy"); ok {
				out = append(out, registeredPolicy{name, v.Field(i)})
			} else if v.Field(i).Kind() == reflect.Struct {
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(p).Elem())
	return out
}

// text is the policy's value as an operator reads it: a duration as Go
// writes it (5m0s), an unset FirstVersion as none.
func (r registeredPolicy) text() string {
	switch v := r.v.Interface().(type) {
	case time.Duration:
		return v.String()
	case *int64:
		if v == nil {
			return "none"
		}
		return strconv.FormatInt(*v, 10)
	}
	return fmt.Sprint(r.v.Interface())
}

var durationType = reflect.TypeFor[time.Duration]()

// registration is p as a registration records it: a JSON object of the
// registered policies, durations as Go duration strings ("5m0s").
func (p Policies) registration() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, r := range p.registered() {
		var v any = r.v.Interface()
		if r.v.Type() == durationType {
			v = r.text()
		}
		val, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", r.name, val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// RegisteredPolicies returns the policies consumer r registered. A policy
// the registration does not record (written by an older seqbox), or
// records empty, is left zero.
func RegisteredPolicies(r store.Registration) (Policies, error) {
	var p Policies
	return p, p.readRegistration(r)
}

// readRegistration sets the policies r records; the others keep their
// value.
func (p *Policies) readRegistration(r store.Registration) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.Policies, &raw); err != nil {
		return fmt.Errorf("consumer %q: registered policies are not readable: %w", r.Consumer, err)
	}
	for _, f := range p.registered() {
		text, ok := raw[f.name]
		if !ok || string(text) == `""` {
			continue
		}
		if f.v.Type() != durationType {
			f.v.SetZero() // FirstVersion: a new pointer, never p's
			if err := json.Unmarshal(text, f.v.Addr().Interface()); err != nil {
				return fmt.Errorf("consumer %q: registered policy %s %s: %w", r.Consumer, f.name, text, err)
			}
			continue
		}
		var s string
		if err := json.Unmarshal(text, &s); err != nil {
			return fmt.Errorf("consumer %q: registered policy %s %s: %w", r.Consumer, f.name, text, err)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("consumer %q: registered policy %s %q: %w", r.Consumer, f.name, s, err)
		}
		f.v.SetInt(int64(d))
	}
	return nil
}

// policyMismatch names the first registered policy in which ours and
// theirs differ, with both values ("" when they agree).
func policyMismatch(ours, theirs Policies) (name, a, b string) {
	if ours.FirstVersion != nil && theirs.FirstVersion != nil && *ours.FirstVersion == *theirs.FirstVersion {
		theirs.FirstVersion = ours.FirstVersion // == compares the pointers
	}
	if ours == theirs {
		return "", "", ""
	}
	rs := theirs.registered()
	for i, o := range ours.registered() {
		if a, b := o.text(), rs[i].text(); a != b {
			return o.name, a, b
		}
	}
	return "", "", "" // they differ in a policy not registered (Retry's backoffs)
}

// GapPolicy says what happens when a key's next version is missing.
type GapPolicy string

const (
	// GapHold parks the newer event until the gap closes or HoldTimeout
	// passes (the default).
	GapHold GapPolicy = "hold"
	// GapAdvance records the gap and applies the newer event: for events
	// that carry the object's full state.
	GapAdvance GapPolicy = "advance"
)

// HoldExpiry says what happens when a hold reaches HoldTimeout.
type HoldExpiry string

const (
	// HoldExpiryBlock blocks the key for reconciliation (the default).
	HoldExpiryBlock HoldExpiry = "block"
	// HoldExpiryAdvance records the gap and applies the held events.
	HoldExpiryAdvance HoldExpiry = "advance"
)

// DeadLetterPolicy says what happens to an ordered key's successors when
// one of its messages is dead-lettered.
type DeadLetterPolicy string

const (
	// DeadLetterBlock blocks the key: successors park as blocked until an
	// operator redrives or skips (the default).
	DeadLetterBlock DeadLetterPolicy = "block"
	// DeadLetterRelease records a known gap and lets the key continue.
	DeadLetterRelease DeadLetterPolicy = "release"
)

// RetryPolicy bounds how often a transient failure is retried.
type RetryPolicy struct {
	// MaxAttempts counts every delivery, the first included. Default 5,
	// at most MaxRetryAttempts.
	// The only part of a RetryPolicy a consumer registers.
	MaxAttempts int `policy:"max_attempts"`
	// InitialBackoff is the nack delay after the first failure; it doubles
	// per attempt. Default 1s.
	InitialBackoff time.Duration
	// MaxBackoff caps the delay. Default 5m.
	MaxBackoff time.Duration
}

// Backoff returns the redelivery delay after the given failed attempt.
func (r RetryPolicy) Backoff(attempt int) time.Duration {
	d := r.InitialBackoff
	for i := 1; i < attempt && d < r.MaxBackoff; i++ {
		d *= 2
	}
	if d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	return d
}

package seqbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/handlerkind"
	"github.com/seqbox/seqbox/store"
)

func init() {
	fault.Install = func(c any, hook fault.Hook) {
		cons := c.(*Consumer)
		cons.cfg.hooks, cons.p.cfg.hooks = hook, hook
	}
	handlerkind.Set = func(c any, kind string) {
		cons := c.(*Consumer)
		cons.kind = kind
		cons.p.retryAtOnce = kind == store.HandlerRecord
	}
}

// heartbeatEvery is how often Run refreshes the consumer's heartbeat.
const heartbeatEvery = 5 * time.Second

// LiveWithin is how recent a heartbeat must be for a consumer to count as
// running: three missed heartbeats and it is presumed gone.
const LiveWithin = 3 * heartbeatEvery

// Policies is the part of a Config a consumer registers in the database,
// so that operator commands know how it orders and retries without being
// told again. Durations are Go duration strings ("5m0s").
type Policies struct {
	GapPolicy    GapPolicy        `json:"gap_policy"`
	HoldTimeout  string           `json:"hold_timeout"`
	HoldExpiry   HoldExpiry       `json:"hold_expiry"`
	FirstVersion *int64           `json:"first_version"`
	OnDeadLetter DeadLetterPolicy `json:"on_dead_letter"`
	MaxBlock     string           `json:"max_block"`
	MaxAge       string           `json:"max_age"`
	MaxAttempts  int              `json:"max_attempts"`
	Retention    string           `json:"retention"`
}

// policies is what c registers.
func (c *Config) policies() Policies {
	return Policies{
		GapPolicy: c.GapPolicy, HoldTimeout: c.HoldTimeout.String(), HoldExpiry: c.HoldExpiry,
		FirstVersion: c.FirstVersion, OnDeadLetter: c.OnDeadLetter, MaxBlock: c.MaxBlock.String(),
		MaxAge: c.MaxAge.String(), MaxAttempts: c.Retry.MaxAttempts, Retention: c.Retention.String(),
	}
}

// Apply sets the policy fields of cfg from p, so that a consumer built from
// a registration orders and retries as the registered one did.
func (p Policies) Apply(cfg *Config) error {
	durations := []struct {
		name string
		text string
		dst  *time.Duration
	}{
		{"hold_timeout", p.HoldTimeout, &cfg.HoldTimeout}, {"max_block", p.MaxBlock, &cfg.MaxBlock},
		{"max_age", p.MaxAge, &cfg.MaxAge}, {"retention", p.Retention, &cfg.Retention},
	}
	for _, d := range durations {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return fmt.Errorf("registered policy %s %q: %w", d.name, d.text, err)
		}
		*d.dst = v
	}
	cfg.GapPolicy, cfg.HoldExpiry, cfg.OnDeadLetter = p.GapPolicy, p.HoldExpiry, p.OnDeadLetter
	cfg.FirstVersion, cfg.Retry.MaxAttempts = p.FirstVersion, p.MaxAttempts
	return nil
}

// RegisteredPolicies decodes the policies of a registration.
func RegisteredPolicies(r store.Registration) (Policies, error) {
	var p Policies
	if err := json.Unmarshal(r.Policies, &p); err != nil {
		return p, fmt.Errorf("consumer %q: registered policies are not readable: %w", r.Consumer, err)
	}
	return p, nil
}

// processName names this process in registrations and taken requests.
func processName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// register records the consumer in the database once per Consumer (again
// after a failure), and with a heartbeat when running says it is live.
func (c *Consumer) register(ctx context.Context, running bool) error {
	return c.registerWith(ctx, running, nil)
}

// registerWith is register, inside tx when it is not nil.
func (c *Consumer) registerWith(ctx context.Context, running bool, tx *sql.Tx) error {
	if !running && c.registered.Load() {
		return nil
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if !running && c.registered.Load() {
		return nil
	}
	pol, err := json.Marshal(c.cfg.policies())
	if err != nil {
		return err
	}
	r := store.Registration{Consumer: c.cfg.Name, HandlerKind: c.kind, Policies: pol,
		Process: c.process, StartedAt: time.Now()}
	if running {
		r.HeartbeatAt = time.Now()
	}
	write := c.cfg.Store.Executor().ConsumerRegister
	if tx != nil {
		write = func(ctx context.Context, r store.Registration) error {
			return c.cfg.Store.UnwrapTx(tx).ConsumerRegister(ctx, r)
		}
	}
	if err := write(ctx, r); err != nil {
		return fmt.Errorf("register consumer %q: %w", c.cfg.Name, err)
	}
	c.registered.Store(true)
	return nil
}

// randomSuffix tells apart consumers of one process.
func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

package engine

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
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// SetHooks installs the crash hooks of seqbox's tests and chaos harness
// (internal/fault), before the consumer runs.
func (c *Consumer) SetHooks(hook fault.Hook) { c.hooks, c.p.hooks = hook, hook }

// SetKind registers the consumer's handler kind (store.HandlerRecord for
// seqbox's own record handler, which replay's rules then apply to).
func (c *Consumer) SetKind(kind string) {
	c.kind = kind
	c.p.retryAtOnce = kind == store.HandlerRecord
}

// heartbeatEvery is how often Run refreshes the consumer's heartbeat.
const heartbeatEvery = seqboxtype.HeartbeatEvery

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
	pol, err := json.Marshal(c.cfg.Policies())
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

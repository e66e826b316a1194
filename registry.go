package seqbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
)

// heartbeatEvery is how often Run refreshes the consumer's heartbeat.
const heartbeatEvery = HeartbeatEvery

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
	ours := c.cfg.Policies
	pol, err := ours.registration()
	if err != nil {
		return err
	}
	now := time.Now()
	r := store.Registration{Consumer: c.cfg.Name, HandlerKind: c.kind, Policies: pol,
		Process: c.process, StartedAt: now}
	if running {
		r.HeartbeatAt = now
	}
	// The registration in place is read and replaced in one transaction
	// (SQLite's writers take turns), so that two consumers starting at
	// once with different policies cannot both pass the check.
	write := func(ctx context.Context, ex store.Executor) error {
		prev, err := ex.ConsumerGet(ctx, c.cfg.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			if err := c.checkPolicies(prev, ours, now); err != nil {
				return err
			}
		}
		return ex.ConsumerRegister(ctx, r)
	}
	if tx != nil {
		err = write(ctx, c.cfg.Store.UnwrapTx(tx))
	} else {
		err = c.registerTx(ctx, write)
	}
	if err != nil {
		if errors.Is(err, ErrPolicyConflict) {
			return err
		}
		return fmt.Errorf("register consumer %q: %w", c.cfg.Name, err)
	}
	c.registered.Store(true)
	return nil
}

// registerTx runs fn in a short transaction of its own.
func (c *Consumer) registerTx(ctx context.Context, fn func(context.Context, store.Executor) error) error {
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// ErrPolicyConflict is matched by the error of a consumer that registers
// (Run, or its first delivery) while a live consumer of the same name (its
// heartbeat within LiveWithin) is registered with different
// policies. Consumers of one name compete for one inbox: they must order,
// retry and retain alike. A registration whose heartbeat is older (a dead
// process), or that never ran, is replaced.
var ErrPolicyConflict = errors.New("a live consumer of the same name is registered with different policies")

// policyConflict is an ErrPolicyConflict naming the first policy that
// differs.
type policyConflict struct {
	consumer, policy, ours, theirs, process string
	age                                     time.Duration
}

func (e *policyConflict) Error() string {
	return fmt.Sprintf("consumer %q: policy %s is %s here but %s in the live consumer of the same name (process %s, heartbeat %s ago): "+
		"consumers of one name compete for its messages and must share its policies; stop that one, give this one another name, "+
		"or wait until that heartbeat is %s old",
		e.consumer, e.policy, e.ours, e.theirs, e.process, e.age.Round(time.Millisecond), LiveWithin)
}

// Is makes errors.Is(err, ErrPolicyConflict) true.
func (e *policyConflict) Is(target error) bool { return target == ErrPolicyConflict }

// checkPolicies refuses to replace prev, the registration in place, when
// it is live and its policies differ from ours. A policy prev does not
// record (registered by an older seqbox) agrees with ours.
func (c *Consumer) checkPolicies(prev store.Registration, ours Policies, now time.Time) error {
	age := now.Sub(prev.HeartbeatAt)
	if prev.HeartbeatAt.IsZero() || age >= LiveWithin {
		return nil // never ran, or stopped: replaced
	}
	conflict := &policyConflict{consumer: c.cfg.Name, process: prev.Process, age: max(age, 0)}
	theirs := ours
	if err := theirs.readRegistration(prev); err != nil {
		conflict.policy, conflict.ours, conflict.theirs = "policies", "readable", "unreadable ("+err.Error()+")"
		return conflict
	}
	conflict.policy, conflict.ours, conflict.theirs = policyMismatch(ours, theirs)
	if conflict.policy == "" {
		return nil
	}
	return conflict
}

// checkRegistration registers the consumer as running, as Run does first, and
// returns the error when a live consumer of the same name is registered
// with different policies (ErrPolicyConflict): Run must not start then.
// Other failures are logged and left to the control loop, which registers
// again later (a full disk does not stop a consumer).
func (c *Consumer) checkRegistration(ctx context.Context) error {
	if c.cfg.Transport == nil {
		return nil // Run refuses it
	}
	err := c.register(ctx, true)
	if errors.Is(err, ErrPolicyConflict) {
		return err
	}
	if err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn("seqbox: registration failed; retrying", "consumer", c.cfg.Name, "err", err)
	}
	return nil
}

// markStopped dates back the heartbeat of a consumer whose Run ends
// cleanly, while the registration is still this process's, so that it no
// longer counts as live: a consumer of the same name restarted at once
// with other policies may register. A crash leaves the heartbeat to age.
func (c *Consumer) markStopped(ctx context.Context) {
	if fault.IsCrash(context.Cause(ctx)) || !c.registered.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ex := c.cfg.Store.Executor()
	if r, err := ex.ConsumerGet(ctx, c.cfg.Name); err != nil || r.Process != c.process {
		return
	}
	if err := ex.ConsumerHeartbeat(ctx, store.ConsumerHeartbeatParams{Consumer: c.cfg.Name, At: time.Now().Add(-LiveWithin)}); err != nil {
		c.cfg.Logger.Warn("seqbox: could not mark the consumer stopped; its heartbeat will age", "consumer", c.cfg.Name, "err", err)
	}
}

// randomSuffix tells apart consumers of one process.
func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

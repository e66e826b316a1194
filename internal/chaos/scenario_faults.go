package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
)

// outageGrace is how long after an outage ends consumers may still fail
// from it.
const outageGrace = 5 * time.Second

// diskFullFor is how long the consumers' disk stays full.
const diskFullFor = 2 * time.Second

// diskFull checks the consumers while their disk is full: they must stay
// up, say clearly that writing failed, and not commit anything; the
// supervise loop that follows checks they resume once space is back.
func (s *scenarioRun) diskFull(ctx context.Context) error {
	time.Sleep(diskFullFor * 3 / 4)
	var effects int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_record_effects`).Scan(&effects); err != nil {
		return err
	}
	if effects != 0 {
		s.res.fail("disk full: %d effects committed while no file could grow", effects)
	}
	for _, p := range s.procs {
		if p.exited() {
			s.res.fail("disk full: %s exited instead of waiting for space: %v", p.name, p.err)
		}
		out := p.output.String()
		if !strings.Contains(out, "disk is full") && !strings.Contains(out, "disk I/O error") {
			s.res.fail("disk full: %s did not report the write failure clearly; its output: %.300s", p.name, out)
		}
	}
	return nil
}

func (s *scenarioRun) killGap() time.Duration {
	return time.Duration(50+s.h.r.IntN(200)) * time.Millisecond
}

func (s *scenarioRun) startCheckpointer() error {
	p, err := s.h.start("checkpointer", nil, "--mode", "checkpoint", "--db", s.db)
	s.aux = p
	return err
}

// fixAndRedrive is the operator: fix what the poisons needed, then redrive
// the DLQ (under SIGKILL in the during_redrive scenario) until nothing but
// rejected envelopes remains.
func (s *scenarioRun) fixAndRedrive(ctx context.Context) error {
	for _, m := range s.h.wl.Phase1 {
		if m.Kind == Poison {
			if _, err := s.st.DB().ExecContext(ctx, `INSERT INTO chaos_fixed (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, m.ID); err != nil {
				return fmt.Errorf("fix poison: %w", err)
			}
		}
	}
	failures := 0
	for attempt := 0; ; attempt++ {
		var env []string
		if s.name == "fault:"+string(fault.DuringRedrive) && s.kills < s.h.opt.Kills {
			// Armed within the dead letters still open, so the point is
			// reached (a larger n killed nothing in small runs).
			open, err := s.openDeadLetters(ctx)
			if err != nil {
				return err
			}
			if open > 0 {
				env = []string{fault.Env + "=" + string(fault.DuringRedrive) + ":" + strconv.Itoa(1+s.h.r.IntN(min(open, 5)))}
			}
		}
		p, err := s.h.runOnce(ctx, "redrive", env, s.workerArgs("redrive")...)
		if err != nil {
			return err
		}
		switch {
		case p.err == nil:
			s.h.progress("%s: redrive done after %d kills", s.name, s.kills)
			return nil
		case p.killedBySIGKILL():
			s.kills++
		default:
			// An operator reruns a redrive that failed on a busy database;
			// it is idempotent (resolved rows are skipped). Give up only
			// when it keeps failing.
			failures++
			s.h.progress("%s: redrive process failed (%d): %s", s.name, failures, lastLine(p.output.String()))
			if failures >= 5 {
				return fmt.Errorf("redrive process failed %d times: %v: %s", failures, p.err, lastLine(p.output.String()))
			}
			time.Sleep(time.Second)
		}
		if attempt > 1000 {
			return fmt.Errorf("redrive never finished")
		}
	}
}

// openDeadLetters counts the consumer's dead letters still open.
func (s *scenarioRun) openDeadLetters(ctx context.Context) (int, error) {
	var n int
	err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_dlq WHERE consumer = $1 AND state = 'open'`, Consumer).Scan(&n)
	return n, err
}

// purge runs retention 60 days in the future (under SIGKILL in the
// during_purge scenario) and checks that it removed every identity and
// nothing else.
func (s *scenarioRun) purge(ctx context.Context) error {
	effectsBefore := s.res.ActualEffects
	args := append(s.workerArgs("purge"), "--now-offset", (60 * 24 * time.Hour).String())
	failures := 0
	for attempt := 0; ; attempt++ {
		var env []string
		if s.name == "fault:"+string(fault.DuringPurge) && s.kills < s.h.opt.Kills {
			// Its first batch: a small run purges in a few, and a later n
			// killed nothing; each run killed so purges less, so the kills
			// still fall at different rows.
			env = []string{fault.Env + "=" + string(fault.DuringPurge) + ":1"}
		}
		p, err := s.h.runOnce(ctx, "purge", env, args...)
		if err != nil {
			return err
		}
		if p.err == nil {
			break
		}
		if !p.killedBySIGKILL() {
			failures++
			s.h.progress("%s: purge process failed (%d): %s", s.name, failures, lastLine(p.output.String()))
			if failures >= 5 {
				return fmt.Errorf("purge process failed %d times: %v: %s", failures, p.err, lastLine(p.output.String()))
			}
			time.Sleep(time.Second)
			continue
		}
		s.kills++
		if attempt > 1000 {
			return fmt.Errorf("purge never finished")
		}
	}
	c, err := s.st.Executor().Counts(ctx, Consumer)
	if err != nil {
		return err
	}
	if c.InboxRows != 0 {
		s.res.fail("purge left %d inbox identities past retention", c.InboxRows)
	}
	var effects int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1`, Consumer).Scan(&effects); err != nil {
		return err
	}
	if effects != effectsBefore {
		s.res.fail("purge changed business effects: %d before, %d after", effectsBefore, effects)
	}
	return integrity(ctx, s.st.DB(), s.db, s.res)
}

// restartPostgres stops the cluster the hard way and starts it again.
func (s *scenarioRun) restartPostgres(ctx context.Context) error {
	if s.h.opt.PGData == "" || s.h.opt.PGBin == "" {
		return fmt.Errorf("pg-restart needs --pg-data and --pg-bin (or SEQBOX_TEST_POSTGRES_DATA/BIN)")
	}
	pgctl := func(args ...string) error {
		full := append([]string{filepath.Join(s.h.opt.PGBin, "pg_ctl"), "-D", s.h.opt.PGData}, args...)
		if os.Geteuid() == 0 {
			full = append([]string{"runuser", "-u", "postgres", "--"}, full...)
		}
		out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg_ctl %s: %v: %s", args[0], err, out)
		}
		return nil
	}
	s.outage.Store(true)
	if err := pgctl("stop", "-m", "immediate"); err != nil {
		return err
	}
	s.h.progress("%s: PostgreSQL stopped (immediate)", s.name)
	time.Sleep(time.Second)
	if err := pgctl("start", "-w", "-l", filepath.Join(filepath.Dir(s.h.opt.PGData), "log")); err != nil {
		return err
	}
	s.h.progress("%s: PostgreSQL started again", s.name)
	time.AfterFunc(outageGrace, func() { s.outage.Store(false) })
	return nil
}

package chaos

import (
	"context"

	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/store"
)

// checkHistories checks the histories of a consumer scenario against
// CheckHistory, before the purge removes what accounts for skipped
// versions: the chaos consumer's effects, stage B's in the outbox chain,
// and the remote's effects in the agent-ledger scenario. Every chaos
// process runs with FirstVersion 1 (RunWorker). No unversioned key has a
// publish order to check: every keyed message of the workload carries a
// version, and the harness publishes each key's versions reordered.
func (s *scenarioRun) checkHistories(ctx context.Context) {
	spec := HistorySpec{FirstVersion: &firstVersion}
	check := func(what, consumer string, remote bool) {
		acc, err := loadAccounting(ctx, s.st, consumer)
		if err != nil {
			s.res.fail("%s: %v", what, err)
			return
		}
		spec.Accounted = acc
		var h []Apply
		if remote {
			h = s.remote.history()
		} else if h, err = effectHistory(ctx, s.st.DB(), consumer, s.h.wl.businessKeys()); err != nil {
			s.res.fail("%s: %v", what, err)
			return
		}
		reportHistory(s.res, what, CheckHistory(h, spec))
	}
	check("history", Consumer, false)
	if s.name == chainScenario {
		check("stage B history", chainConsumer, false)
	}
	if s.remote != nil {
		check("remote history", Consumer, true)
	}
}

// businessKeys maps each identity ("source/id") of the workload to its
// business key, for the identities that have one.
func (w Workload) businessKeys() map[string]string {
	out := map[string]string{}
	for _, m := range append(append([]Message(nil), w.Phase1...), w.Phase2...) {
		if bk := businessKeyOf(m); m.ID != "" && bk != "" {
			out[m.Source+"/"+m.ID] = bk
		}
	}
	return out
}

// checkHistory checks the agent's receipt log against CheckHistory, with
// the gateway consumer's accounting and the publish order of each key
// without objectversion: every key's producer posts its events one after
// the other, each once the one before it was accepted (a re-send repeats
// an identity, it adds none), and the gateway delivers a key's events in
// acceptance order (message groups), so the agent must apply them in that
// order. serve runs without FirstVersion.
func (s *serveRun) checkHistory(ctx context.Context, st store.Store, wl serveWorkload) {
	acc, err := loadAccounting(ctx, st, serve.DefaultConsumer)
	if err != nil {
		s.res.fail("history: %v", err)
		return
	}
	reportHistory(s.res, "history", CheckHistory(s.agent.history(), HistorySpec{Accounted: acc, PublishOrder: wl.order}))
}

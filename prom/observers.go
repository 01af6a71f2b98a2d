package prom

import (
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// RecoveryObserver counts what a recovery.Decider carried out: startup
// decisions (execfsm_startup_decisions_total), SIGTERM actions
// (execfsm_sigterm_actions_total), failovers and spent failover
// allowances, and the moves it and its Reapers made because a timer or a
// budget fell due. Give it to Decider.WithObserver. The table names the
// states of those moves.
func RecoveryObserver[S comparable](m *Metrics, table *transition.Table[S]) (recovery.Observer[S], error) {
	if m == nil || table == nil {
		return recovery.Observer[S]{}, errors.New("prom: RecoveryObserver: nil Metrics or table")
	}
	return recovery.Observer[S]{
		Startup: func(v recovery.Verdict[S], err error) {
			result := "ok"
			switch {
			case v.Decision == recovery.DecisionRefuse && errors.Is(err, recovery.ErrTerminalStatus):
			case errors.Is(err, storage.ErrHeld):
				result = "held"
			case err != nil:
				result = "error"
			}
			m.startups.WithLabelValues(v.Decision.String(), result).Inc()
			if err != nil {
				return // nothing written: no restart was counted
			}
			if v.Failovers > 0 {
				m.failovers.Inc()
			}
			if v.Decision == recovery.DecisionFail && v.Failovers > 0 {
				m.failoversSpent.Inc() // a failover counted and the execution failed: the allowance is spent
			}
		},
		Terminate: func(a recovery.Action, err error) {
			result := "ok"
			if err != nil {
				result = "error"
			}
			m.terminations.WithLabelValues(a.Kind.String(), result).Inc()
		},
		Enforced: func(e recovery.Enforced[S]) {
			m.enforced.WithLabelValues(stateLabel(table, e.From), stateLabel(table, e.To), e.Cause.String()).Inc()
		},
	}, nil
}

// ReconcileObserver counts a reconcile.Loop's calls with
// controller-runtime's metrics and labels, so its dashboards and alerts
// work unchanged: controller_runtime_reconcile_total{controller,result}
// (success, error, requeue_after), _reconcile_errors_total,
// _terminal_reconcile_errors_total, _reconcile_panics_total,
// _reconcile_time_seconds (its buckets), and workqueue_retries_total for
// the keys retried with backoff. A panic or a terminal error is an
// error too, as there. Set it as the Loop's Options.ReconcileObserver;
// [WatchQueue] adds its queue depth.
func ReconcileObserver[K comparable](m *Metrics, controller string) (reconcile.ReconcileObserver[K], error) {
	if m == nil || controller == "" {
		return nil, errors.New("prom: ReconcileObserver: nil Metrics or empty controller name")
	}
	success := m.reconciles.WithLabelValues(controller, "success")
	requeue := m.reconciles.WithLabelValues(controller, "requeue_after")
	failed := m.reconciles.WithLabelValues(controller, "error")
	errs := m.reconcileErrors.WithLabelValues(controller)
	terminal := m.terminalErrors.WithLabelValues(controller)
	panics := m.panics.WithLabelValues(controller)
	took := m.reconcileTime.WithLabelValues(controller)
	retries := m.retries.WithLabelValues(controller, controller)
	return reconcile.ReconcileObserverFunc[K](func(ev reconcile.ReconcileEvent[K]) {
		took.Observe(ev.Duration.Seconds())
		switch ev.Outcome {
		case reconcile.OutcomeSucceeded:
			success.Inc()
		case reconcile.OutcomeRequeued:
			requeue.Inc()
		case reconcile.OutcomeErrored, reconcile.OutcomeTerminal, reconcile.OutcomePanicked:
			failed.Inc()
			errs.Inc()
			switch ev.Outcome {
			case reconcile.OutcomeTerminal:
				terminal.Inc()
			case reconcile.OutcomePanicked:
				panics.Inc()
				retries.Inc()
			default:
				retries.Inc()
			}
		}
	}), nil
}

// AdoptionObserver counts what a reconcile.Loop's adoption pass
// adopted, found gone and failed to handle, per controller. Set it as
// the Loop's Options.AdoptionObserver.
func AdoptionObserver[K comparable](m *Metrics, controller string) (reconcile.AdoptionObserver[K], error) {
	if m == nil || controller == "" {
		return nil, errors.New("prom: AdoptionObserver: nil Metrics or empty controller name")
	}
	return reconcile.AdoptionObserverFunc[K](func(r reconcile.AdoptionReport[K]) {
		m.adopted.WithLabelValues(controller).Add(float64(len(r.Adopted)))
		m.gone.WithLabelValues(controller).Add(float64(len(r.Gone)))
		m.adoptionErrors.WithLabelValues(controller).Add(float64(r.Errors))
	}), nil
}

// WatchQueue reports loop's queue depth as workqueue_depth{name,
// controller} (both the controller's name, priority empty, as
// controller-runtime labels it), read at every scrape. A second loop
// under the same name is refused.
func WatchQueue[K comparable](m *Metrics, controller string, loop *reconcile.Loop[K]) error {
	if m == nil || controller == "" || loop == nil {
		return errors.New("prom: WatchQueue: nil Metrics or loop, or empty controller name")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.loops[controller]; dup {
		return fmt.Errorf("prom: WatchQueue: a queue named %q is watched already", controller)
	}
	m.loops[controller] = func() int { return loop.Stats().QueueDepth }
	return nil
}

// RunObservers makes, over m and in one call, every observer the run
// harness tells (run.Config.Observers, run.ManagerConfig.Observers): the
// moves of the table's executions (as [NewTransitions]), the decisions
// (as [RecoveryObserver]) and a manager's Loop under controller's name
// (as [ReconcileObserver] and [AdoptionObserver]); the roles' table names
// the states.
func RunObservers[S comparable](m *Metrics, roles *recovery.Roles[S], controller string) (run.Observers[S], error) {
	if roles == nil {
		return run.Observers[S]{}, errors.New("prom: RunObservers: nil roles")
	}
	table := roles.Table()
	moves, err := NewTransitions(m, table)
	if err != nil {
		return run.Observers[S]{}, err
	}
	decisions, err := RecoveryObserver(m, table)
	if err != nil {
		return run.Observers[S]{}, err
	}
	reconciles, err := ReconcileObserver[string](m, controller)
	if err != nil {
		return run.Observers[S]{}, err
	}
	adoptions, err := AdoptionObserver[string](m, controller)
	if err != nil {
		return run.Observers[S]{}, err
	}
	return run.Observers[S]{Moves: moves.Observers(), Decisions: decisions, Reconciles: reconciles, Adoptions: adoptions}, nil
}

// Package prom exports execfsm's metrics to Prometheus: what operators
// graph and alert on, fed by the observers the core packages call.
//
// One [Metrics] is one prometheus.Collector; register it with the
// registry the process serves (promhttp.HandlerFor), then hand its
// observers to what they watch; for the run harness, [RunObservers]
// makes all of them in one call:
//
//   - moves of executions, by the state left, the state asked for and
//     the result (done, not_allowed, guard, conflict, fenced, error):
//     [NewTransitions], whose Observers are given to
//     transition.NewMachine or NewPersisted — execfsm_transitions_total;
//   - executions by status, every status of the table (relocating
//     included) with zeros, kept from a store's List and Watch:
//     [NewStatuses] and its Run — execfsm_executions,
//     execfsm_unreadable_records;
//   - startup decisions and SIGTERM actions by kind, failovers, spent
//     failover allowances and the moves made because a timer or a budget
//     fell due: [RecoveryObserver], given to
//     recovery.Decider.WithObserver — execfsm_startup_decisions_total,
//     execfsm_sigterm_actions_total, execfsm_failovers_total,
//     execfsm_failovers_spent_total, execfsm_enforced_moves_total;
//   - a reconcile.Loop, under controller-runtime's names and labels so
//     existing dashboards and alerts work: [ReconcileObserver] —
//     controller_runtime_reconcile_total{controller,result},
//     controller_runtime_reconcile_errors_total,
//     controller_runtime_terminal_reconcile_errors_total,
//     controller_runtime_reconcile_panics_total,
//     controller_runtime_reconcile_time_seconds (controller-runtime's
//     buckets), workqueue_retries_total; [WatchQueue] —
//     workqueue_depth{name,controller,priority}; [AdoptionObserver] —
//     execfsm_adoption_adopted_total, execfsm_adoption_gone_total,
//     execfsm_adoption_errors_total.
//
// A process that also runs controller-runtime registers its own
// controller_runtime_* and workqueue_* collectors in
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry: register this
// Metrics in another registry, or the names collide.
//
// Labels stay bounded: states are named by their table (a state it does
// not know is "unknown"), controllers by the names given here, and no
// label holds an execution's id.
//
// The package lives in its own module, so the core does not depend on
// the Prometheus client.
package prom

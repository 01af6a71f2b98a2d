package prom

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Results of a transition, the values of execfsm_transitions_total's
// result label.
const (
	ResultDone       = "done"        // the move was made (written, for a Persisted)
	ResultNotAllowed = "not_allowed" // the table has no such move
	ResultGuard      = "guard"       // a guard vetoed it
	ResultConflict   = "conflict"    // other writers kept winning until the retries ran out
	ResultFenced     = "fenced"      // the writer's ownership had ended or passed to another
	ResultError      = "error"       // anything else: the store failed, the context ended
)

// Metrics is every metric of this package, one prometheus.Collector to
// register once (prometheus.Registerer.Register). Feed it through the
// observers it hands out: [Transitions] for moves, [RecoveryObserver]
// for startup, SIGTERM and deadline decisions, [ReconcileObserver] and
// [AdoptionObserver] for a reconcile.Loop, [Statuses] for the
// executions by status. A Metrics has no global state: two registries can
// hold two of them.
type Metrics struct {
	transitions *prometheus.CounterVec

	startups        *prometheus.CounterVec
	terminations    *prometheus.CounterVec
	failovers       prometheus.Counter
	failoversSpent  prometheus.Counter
	enforced        *prometheus.CounterVec
	reconciles      *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	terminalErrors  *prometheus.CounterVec
	panics          *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	retries         *prometheus.CounterVec
	adopted         *prometheus.CounterVec
	gone            *prometheus.CounterVec
	adoptionErrors  *prometheus.CounterVec

	executions *prometheus.Desc
	unreadable *prometheus.Desc
	depth      *prometheus.Desc

	mu       sync.Mutex
	loops    map[string]func() int // queue depth by controller name
	statuses []statusSnapshotter
}

// statusSnapshotter is a [Statuses] of any state type.
type statusSnapshotter interface {
	snapshot() (byStatus map[string]int, unreadable int, ok bool)
}

// ReconcileTimeBuckets are controller-runtime's buckets for
// controller_runtime_reconcile_time_seconds, so its dashboards read these
// histograms unchanged.
var reconcileTimeBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// New returns the metrics, with every counter at zero.
func New() *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	return &Metrics{
		transitions: counter("execfsm_transitions_total",
			"Moves of executions by the state they left, the state they asked for and their result (done, not_allowed, guard, conflict, fenced, error).",
			"from", "to", "result"),
		startups: counter("execfsm_startup_decisions_total",
			"Startup decisions carried out by Decider.Start, by decision (start, resume, stop, fail, refuse, wait, finish) and result (ok, held, error).",
			"decision", "result"),
		terminations: counter("execfsm_sigterm_actions_total",
			"SIGTERM actions carried out by Decider.Terminate, by action (shutdown, relocate, leave) and result (ok, error).",
			"action", "result"),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "execfsm_failovers_total",
			Help: "Failovers: unexpected restarts of a controller (a running status found on startup without a relocation) counted against the failover allowance."}),
		failoversSpent: prometheus.NewCounter(prometheus.CounterOpts{Name: "execfsm_failovers_spent_total",
			Help: "Executions failed on startup because their failover allowance was spent."}),
		enforced: counter("execfsm_enforced_moves_total",
			"Moves made because something fell due, by the state left, the state entered and the cause (timer, budget, abandoned).",
			"from", "to", "cause"),
		reconciles: counter("controller_runtime_reconcile_total",
			"Total number of reconciliations per controller", "controller", "result"),
		reconcileErrors: counter("controller_runtime_reconcile_errors_total",
			"Total number of reconciliation errors per controller", "controller"),
		terminalErrors: counter("controller_runtime_terminal_reconcile_errors_total",
			"Total number of terminal reconciliation errors per controller", "controller"),
		panics: counter("controller_runtime_reconcile_panics_total",
			"Total number of reconciliation panics per controller", "controller"),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "controller_runtime_reconcile_time_seconds",
			Help: "Length of time per reconciliation per controller", Buckets: reconcileTimeBuckets}, []string{"controller"}),
		retries: counter("workqueue_retries_total",
			"Total number of retries handled by workqueue", "name", "controller"),
		adopted: counter("execfsm_adoption_adopted_total",
			"Items a reconcile loop's adoption pass rebuilt, per controller.", "controller"),
		gone: counter("execfsm_adoption_gone_total",
			"Expected keys a reconcile loop's adoption pass found the world no longer has, per controller.", "controller"),
		adoptionErrors: counter("execfsm_adoption_errors_total",
			"Adopt or Gone calls of an adoption pass that failed, per controller.", "controller"),
		executions: prometheus.NewDesc("execfsm_executions",
			"Executions by status, as the store holds them (every status of the table, zero included).", []string{"status"}, nil),
		unreadable: prometheus.NewDesc("execfsm_unreadable_records",
			"Records the store holds but cannot read (damaged, or written in a format this build does not know).", nil, nil),
		depth: prometheus.NewDesc("workqueue_depth",
			"Current depth of workqueue by workqueue and priority", []string{"name", "controller", "priority"}, nil),
		loops: map[string]func() int{},
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.transitions, m.startups, m.terminations, m.failovers, m.failoversSpent, m.enforced,
		m.reconciles, m.reconcileErrors, m.terminalErrors, m.panics, m.reconcileTime, m.retries,
		m.adopted, m.gone, m.adoptionErrors}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.executions
	ch <- m.unreadable
	ch <- m.depth
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	m.mu.Lock()
	loops := make(map[string]func() int, len(m.loops))
	for name, depth := range m.loops {
		loops[name] = depth
	}
	statuses := append([]statusSnapshotter(nil), m.statuses...)
	m.mu.Unlock()
	for name, depth := range loops {
		ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, float64(depth()), name, name, "")
	}
	byStatus, unreadable, listed := map[string]int{}, 0, false
	for _, s := range statuses {
		counts, bad, ok := s.snapshot()
		if !ok {
			continue // not listed yet: no figure beats a wrong one
		}
		listed = true
		for status, n := range counts {
			byStatus[status] += n
		}
		unreadable += bad
	}
	if !listed {
		return
	}
	for status, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(m.executions, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(m.unreadable, prometheus.GaugeValue, float64(unreadable))
}

// Transitions counts the moves of executions under one table in
// execfsm_transitions_total. Give its [Transitions.Observers] to a
// Machine or a Persisted when making it, as the package example does.
type Transitions[S comparable] struct {
	m     *Metrics
	table *transition.Table[S]
}

// NewTransitions returns the counters for moves under table, which names
// the states in the labels.
func NewTransitions[S comparable](m *Metrics, table *transition.Table[S]) (*Transitions[S], error) {
	if m == nil || table == nil {
		return nil, errors.New("prom: NewTransitions: nil Metrics or table")
	}
	return &Transitions[S]{m: m, table: table}, nil
}

// Observers are t's OnChange and OnFailure, for transition.NewMachine
// and transition.NewPersisted.
func (t *Transitions[S]) Observers() transition.Observers[S] {
	return transition.Observers[S]{OnChange: []func(transition.Change[S]){t.OnChange}, OnFailure: []func(transition.Failure[S]){t.OnFailure}}
}

// OnChange counts a move made, result "done"; a record's creation (a
// change from the zero S, which the table does not know) with an empty
// from. A write that changed no state (an ownership take-over, metadata
// only) is not a move and is not counted.
func (t *Transitions[S]) OnChange(c transition.Change[S]) {
	if !c.Changed() {
		return
	}
	from := stateLabel(t.table, c.From)
	var zero S
	if c.From == zero && !t.table.Has(zero) {
		from = ""
	}
	t.m.transitions.WithLabelValues(from, stateLabel(t.table, c.To), ResultDone).Inc()
}

// OnFailure counts a move refused or failed, by its result. A failure
// before the move was known (Failure.Decided false) has empty from and
// to labels.
func (t *Transitions[S]) OnFailure(f transition.Failure[S]) {
	from, to := "", ""
	if f.Decided {
		from, to = stateLabel(t.table, f.Move.From), stateLabel(t.table, f.Move.To)
	}
	t.m.transitions.WithLabelValues(from, to, Result(f.Err)).Inc()
}

// stateLabel is a state's name in table; a state the table does not
// know (a move to it is refused) is labelled "unknown", which keeps the
// label's values bounded by the table.
func stateLabel[S comparable](table *transition.Table[S], s S) string {
	if n, ok := table.Name(s); ok {
		return n
	}
	return "unknown"
}

// Result is the result label for err, a move's error: nil is
// [ResultDone].
func Result(err error) string {
	switch {
	case err == nil:
		return ResultDone
	case errors.Is(err, storage.ErrFenced):
		return ResultFenced
	case errors.Is(err, storage.ErrConflict):
		return ResultConflict
	case errors.Is(err, transition.ErrGuard):
		return ResultGuard
	case errors.Is(err, transition.ErrNotAllowed):
		return ResultNotAllowed
	}
	return ResultError
}

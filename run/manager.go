package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Sync is a manager's work on one execution it drives, in state: bring
// the world in line with it (or it with the world), as a reconciler does,
// and say what next. It is called for every execution, again at every
// resync, at once after it moved the execution, and whenever its Step
// asks; an error is retried with backoff.
type Sync[S comparable] func(ctx context.Context, exec *transition.Persisted[S], state S) (Step, error)

// Step is what a [Sync] asks for next. The zero Step waits for the next
// resync (or for the Sync's own move: an execution it moved is synced
// again at once).
type Step struct {
	// After, if positive, syncs the execution again after it.
	After time.Duration
	// Ended says the work on the execution is over, as Ending tells:
	// the manager writes the end it earned (recovery.Decider.End) and
	// lets the execution go.
	Ended  bool
	Ending recovery.Ending
}

// After is the Step that syncs the execution again after d.
func After(d time.Duration) Step { return Step{After: d} }

// End is the Step that ends the work on the execution, as ending tells.
func End(ending recovery.Ending) Step { return Step{Ended: true, Ending: ending} }

// ManagerConfig is what [Manage] needs. Roles, Store and Sync are
// required.
type ManagerConfig[S comparable] struct {
	// Roles are the table's roles (volcano.Roles(), flink.Roles(...), or
	// your own).
	Roles *recovery.Roles[S]
	// Store keeps the executions, and the leader's record.
	Store storage.Store
	// Table, if set, is the name the table is recorded under first.
	Table string
	// Holder names this process: unique to it. "" is the host name and
	// the process id.
	Holder string
	// Leader, if set, is the record the managers elect their leader on:
	// only the manager that holds it drives, and every execution is held
	// under its one lease (storage.Lease.Under), as a leader-elected
	// operator holds one. "" holds a lease per execution. The record is
	// created if the store lacks it, and is never an execution.
	Leader string
	// TTL is the leader's lease (or each execution's); zero is the
	// store's default.
	TTL time.Duration
	// HandOver says the executions' work runs outside this process (in
	// pods, Jobs, simulators) and goes on without it, as an operator's
	// does (recovery.Policy.Manager): a SIGTERM hands every execution over
	// as it is, and the next manager resumes a running one without
	// counting a failover. Platform, Resumable and Failovers are then
	// left unset. False: the work runs in this process, and a SIGTERM
	// does to each execution what Platform says (relocate, or shut down).
	HandOver bool
	// Platform is what runs this process (recovery.KubernetesJob, ...),
	// as in Config: what a crash and a SIGTERM mean, and the exit code.
	Platform recovery.Platform
	// Resumable says that the work of an execution can be taken up again
	// where it was, after a crash or a relocation (Config.Resumable).
	Resumable bool
	// Failovers are the unexpected restarts resumed before an execution
	// fails (Config.Failovers).
	Failovers recovery.Allowance
	// Sync is the work on each execution.
	Sync Sync[S]
	// World, if set, lists what the world has (the Jobs, the processes)
	// for the Loop's adoption pass (reconcile.Options.World).
	World func(ctx context.Context) ([]reconcile.Item[string], error)
	// CreateMissing says an item World lists that has no record yet is a
	// new execution: it is created in the table's initial state, its
	// annotations as the record's metadata, then taken over. False leaves
	// creating records to someone else (a user's tool, a cluster master):
	// an item without one is an error of the adoption pass.
	CreateMissing bool
	// NoWatch: do not watch the store. Manage syncs an execution when
	// someone else writes it (an operator's stop, a pause) by watching
	// the store, where it can (storage.Watcher), leaving out its own
	// writes; with NoWatch (or a store that cannot watch) such a write
	// is seen at the next Resync.
	NoWatch bool
	// Resync is the Loop's (reconcile.Options.Resync).
	Resync time.Duration
	// Workers sync that many executions at once; zero is 1.
	Workers int
	// Signals brings the SIGTERMs; nil is this process's SIGTERM and
	// SIGINT.
	Signals <-chan os.Signal
	// Observers are told every move, decision and sync
	// (prom.RunObservers makes all of them at once).
	Observers Observers[S]
	// Logger is told each step at Info (the leader elected, what was
	// decided on each execution, its SIGTERM's action, the end written),
	// with the execution's id; a failed hand-over at Error; and it is
	// the Loop's (reconcile.Options.Logger). Nil is slog.Default();
	// slog.New(slog.DiscardHandler) logs nothing.
	Logger *slog.Logger
	// Ready, if set, is called once every execution known at start has
	// been taken over and synced once, with how many are driven.
	Ready func(driven int)
}

// Manage is the life of a process that drives many executions: it elects
// itself leader (with Leader), takes over every execution of the store
// that has not ended (and those World brings), in a reconcile.Loop, and
// syncs each until its Step ends it. A SIGTERM stops the syncs, then
// hands every execution over as it is (HandOver: released, nothing
// written; the exit code is 0, which a Deployment and systemd both read
// right) or does to each what Platform says (relocated: the exit code is
// Platform.RelocateExitCode; shut down: 0), and lets the leader's lease
// go. It returns 1 with the error that cut it short.
func Manage[S comparable](ctx context.Context, c ManagerConfig[S]) (int, error) {
	m, err := newManager(c)
	if err != nil {
		return exitFailed, err
	}
	signals, stop := signalsOr(c.Signals)
	defer stop()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-signals:
			cancel()
		case <-runCtx.Done():
		}
	}()
	err = m.run(runCtx)
	code, handOverErr := m.handOver(context.WithoutCancel(ctx))
	if err != nil && runCtx.Err() == nil {
		return exitFailed, errors.Join(err, handOverErr)
	}
	return code, handOverErr
}

// Driver is what [Manage] does to each execution, for a loop of the
// caller's instead of Manage's own: a controller-runtime manager's
// (package github.com/execfsm/execfsm/kube/ctrlruntime runs one for the
// executions kept in a custom resource), or a reconcile.Loop the caller
// builds with events of its own. [Driver.Reconcile] is one sync of one
// execution; [Driver.HandOver] is Manage's SIGTERM, once the loop has
// stopped. It is safe for concurrent use by the loop's workers.
type Driver[S comparable] struct{ m *manager[S] }

// NewDriver checks c as Manage does. The fields that make Manage's loop
// (World, CreateMissing, NoWatch, Resync, Workers, Signals, Ready) belong
// to the caller's loop and are refused with [ErrInvalidConfig]. The table
// is recorded and the leader elected at the first Reconcile, which
// returns the error if either fails, for the loop to retry.
func NewDriver[S comparable](c ManagerConfig[S]) (*Driver[S], error) {
	loopFields := []string{}
	for name, set := range map[string]bool{"World": c.World != nil, "CreateMissing": c.CreateMissing, "NoWatch": c.NoWatch,
		"Resync": c.Resync != 0, "Workers": c.Workers != 0, "Signals": c.Signals != nil, "Ready": c.Ready != nil} {
		if set {
			loopFields = append(loopFields, name)
		}
	}
	if len(loopFields) > 0 {
		sort.Strings(loopFields)
		return nil, fmt.Errorf("run: %w: %s set for a Driver: they are Manage's loop's, and the Driver's caller runs its own loop",
			ErrInvalidConfig, strings.Join(loopFields, ", "))
	}
	m, err := newManager(c)
	if err != nil {
		return nil, err
	}
	return &Driver[S]{m: m}, nil
}

// Reconcile implements reconcile.Reconciler for execution id: the
// execution taken over the first time (decided on as Manage decides),
// what fell due made (a timer, an exhausted budget), then synced by the
// config's Sync; its Step says when again. An execution that has ended,
// or whose record is gone, is let go. After [Driver.HandOver] it refuses
// with [ErrHandedOver].
func (d *Driver[S]) Reconcile(ctx context.Context, id string) (reconcile.Result, error) {
	d.m.gate.RLock()
	defer d.m.gate.RUnlock()
	if d.m.handedOver {
		return reconcile.Result{}, fmt.Errorf("run: syncing %s: %w", id, ErrHandedOver)
	}
	if err := d.m.prepare(ctx); err != nil {
		return reconcile.Result{}, err
	}
	return d.m.Reconcile(ctx, id)
}

// HandOver is Manage's SIGTERM for a Driver whose loop has stopped (or
// is stopping: it waits for the syncs under way, and refuses any after
// it): every execution it drives handed over as it is (HandOver), or
// relocated or shut down as Platform says, then the leader's lease let
// go. It returns the exit code Manage would, and every error joined.
func (d *Driver[S]) HandOver(ctx context.Context) (int, error) {
	d.m.gate.Lock()
	d.m.handedOver = true
	d.m.gate.Unlock()
	return d.m.handOver(ctx)
}

// Holder is the name the driver writes and holds leases under
// (ManagerConfig.Holder, or the default made for it).
func (d *Driver[S]) Holder() string { return d.m.c.Holder }

// ErrHandedOver is matched by the error of a [Driver.Reconcile] after
// [Driver.HandOver]: the executions are someone else's now.
var ErrHandedOver = errors.New("the driver has handed its executions over")

// manager is one Manage.
type manager[S comparable] struct {
	c       ManagerConfig[S]
	decider *recovery.Decider[S]
	leader  storage.Ownership
	log     *slog.Logger // ManagerConfig.Logger

	mu     sync.Mutex
	driven map[string]*transition.Persisted[S]

	prepareMu sync.Mutex // one prepare at a time
	prepared  bool       // the table recorded and the leader elected

	gate       sync.RWMutex // a Driver's syncs hold it shared, its HandOver whole
	handedOver bool
}

func newManager[S comparable](c ManagerConfig[S]) (*manager[S], error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("run: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Roles == nil:
		return nil, bad("no Roles")
	case c.Store == nil:
		return nil, bad("no Store")
	case c.Sync == nil:
		return nil, bad("no Sync: give ManagerConfig.Sync, the work on each execution")
	case c.TTL != 0 && (c.TTL < storage.MinLeaseTTL || c.TTL > storage.MaxLeaseTTL):
		return nil, bad("TTL %v, want %v to %v (0: the store's default)", c.TTL, storage.MinLeaseTTL, storage.MaxLeaseTTL)
	case c.HandOver && (c.Platform != recovery.Platform{} || c.Resumable || c.Failovers != recovery.Allowance{}):
		return nil, bad("HandOver with Platform, Resumable or Failovers: a manager whose executions' work runs outside it is not restarted with them; leave them unset")
	}
	if _, ok := c.Store.(storage.Lister); !ok {
		return nil, bad("the Store cannot list its executions (storage.Lister)")
	}
	if c.Holder == "" {
		c.Holder = defaultHolder()
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	policy := recovery.Policy{Manager: true}
	if !c.HandOver {
		policy = workPolicy(c.Platform, c.Resumable, c.Failovers)
	}
	d, err := recovery.NewDecider(c.Roles, policy)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	return &manager[S]{c: c, decider: d.WithObserver(c.Observers.Decisions), driven: map[string]*transition.Persisted[S]{},
		log: loggerOr(c.Logger)}, nil
}

// logFor logs about execution id: each record carries it.
func (m *manager[S]) logFor(id string) *slog.Logger { return m.log.With(executionKey, id) }

// handle is a handle on execution id, writing as this manager.
func (m *manager[S]) handle(id string) (*transition.Persisted[S], error) {
	return transition.NewPersisted(m.c.Roles.Table(), m.c.Store, id, transition.PersistedOptions{Actor: m.c.Holder}, m.c.Observers.Moves)
}

// run elects the leader, then runs the Loop until ctx ends.
func (m *manager[S]) run(ctx context.Context) error {
	if err := m.prepare(ctx); err != nil {
		return err
	}
	opts := reconcile.Options[string]{Reconciler: m, Known: m.known, Resync: m.c.Resync, Workers: m.c.Workers,
		ReconcileObserver: m.c.Observers.Reconciles, AdoptionObserver: m.c.Observers.Adoptions, Logger: m.log}
	if w, ok := m.c.Store.(storage.Watcher); ok && !m.c.NoWatch {
		events, err := reconcile.StoreEvents(ctx, w, reconcile.StoreEventsOptions{SkipWritesBy: m.c.Holder,
			OnError: func(err error) { m.log.Warn("run: watching the store again failed; retrying", "err", err) }})
		if err != nil {
			return fmt.Errorf("run: watching the store (NoWatch leaves it to Resync): %w", err)
		}
		opts.Events = events
	}
	if m.c.World != nil {
		opts.World, opts.Adopter = m.c.World, m
	}
	loop, err := reconcile.NewLoop(opts)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	if err := loop.Idle(ctx); err == nil && m.c.Ready != nil {
		m.mu.Lock()
		n := len(m.driven)
		m.mu.Unlock()
		m.c.Ready(n)
	}
	return <-done
}

// prepare records the table and elects the leader, once: Manage's
// start, and a Driver's first sync.
func (m *manager[S]) prepare(ctx context.Context) error {
	m.prepareMu.Lock()
	defer m.prepareMu.Unlock()
	if m.prepared {
		return nil
	}
	if err := recordTable(ctx, m.c.Store, m.c.Table, m.c.Roles); err != nil {
		return err
	}
	if m.c.Leader != "" {
		if err := m.lead(ctx); err != nil {
			return err
		}
	}
	m.prepared = true
	return nil
}

// lead takes the leader's record over, creating it first if need be,
// waiting for the leader before to go.
func (m *manager[S]) lead(ctx context.Context) error {
	if _, err := m.c.Store.Get(ctx, m.c.Leader); errors.Is(err, storage.ErrNotFound) {
		_, err = m.c.Store.Create(ctx, storage.Record{ID: m.c.Leader, Status: "leader"})
		if err != nil && !errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("run: creating the leader's record: %w", err)
		}
	}
	own, _, err := m.c.Store.Acquire(ctx, m.c.Leader, storage.Lease{Holder: m.c.Holder, TTL: m.c.TTL, Wait: true, Reason: "elected"})
	if err != nil {
		return fmt.Errorf("run: electing the leader: %w", err)
	}
	m.leader = own
	m.log.Info("leads", "holder", m.c.Holder)
	return nil
}

// known are the executions of the store that have not ended: an ended
// one needs no manager.
func (m *manager[S]) known(ctx context.Context) ([]string, error) {
	var recs []storage.Record
	var err error
	if pages, ok := m.c.Store.(storage.PageLister); ok {
		// The live statuses only: a manager restarted over a store of
		// a million ended executions reads the few thousand it drives.
		recs, _, err = storage.ListAll(ctx, pages, knownPage, m.c.Roles.Table().LiveStatuses()...)
	} else {
		recs, _, err = m.c.Store.(storage.Lister).List(ctx)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, rec := range recs {
		if rec.ID == m.c.Leader {
			continue
		}
		cur, err := m.c.Roles.StateOf(rec)
		if err != nil || m.c.Roles.Table().IsTerminal(cur) {
			continue // another table's, or ended
		}
		ids = append(ids, rec.ID)
	}
	return ids, nil
}

// knownPage is how many records known asks the store for at a time.
const knownPage = 1000

// Adopt implements reconcile.Adopter: the world's item taken over
// (created first, with CreateMissing).
func (m *manager[S]) Adopt(ctx context.Context, item reconcile.Item[string]) error {
	m.mu.Lock()
	_, driven := m.driven[item.Key]
	m.mu.Unlock()
	if m.c.CreateMissing && !driven {
		exec, err := m.handle(item.Key)
		if err != nil {
			return err
		}
		_, err = exec.Create(ctx, transition.Update[S]{To: m.c.Roles.Table().Initial(), Reason: "listed by the world",
			Meta: maps.Clone(item.Identity.Annotations)})
		if err != nil && !errors.Is(err, storage.ErrExists) {
			return err
		}
	}
	_, err := m.take(ctx, item.Key)
	return err
}

// take takes id over, once: a manager's start.
func (m *manager[S]) take(ctx context.Context, id string) (*transition.Persisted[S], error) {
	m.mu.Lock()
	exec, ok := m.driven[id]
	m.mu.Unlock()
	if ok && !storage.Ended(exec.Ownership()) {
		return exec, nil
	}
	exec, err := m.handle(id)
	if err != nil {
		return nil, err
	}
	lease := storage.Lease{Holder: m.c.Holder, TTL: m.c.TTL, Wait: true, Reason: "manager " + m.c.Holder + " took it over"}
	if m.leader != nil {
		lease.TTL, lease.Under = 0, m.leader
	}
	v, err := m.decider.Start(ctx, exec, lease)
	switch {
	case errors.Is(err, recovery.ErrTerminalStatus), errors.Is(err, recovery.ErrForeignStatus),
		errors.Is(err, storage.ErrNotFound): // retired or deleted
		return nil, nil // nothing to drive
	case err != nil:
		return nil, err
	}
	m.logFor(id).Info("decided", "decision", v.Decision, "reason", v.Reason)
	m.mu.Lock()
	m.driven[id] = exec
	m.mu.Unlock()
	return exec, nil
}

// Reconcile implements reconcile.Reconciler: take the execution over if
// it is not yet, make what fell due, and sync it.
func (m *manager[S]) Reconcile(ctx context.Context, id string) (reconcile.Result, error) {
	if id == m.c.Leader && id != "" {
		return reconcile.Result{}, nil // a watch event of the leader's record
	}
	exec, err := m.take(ctx, id)
	if err != nil || exec == nil {
		return reconcile.Result{}, err
	}
	if _, _, err := m.decider.Advance(ctx, exec); err != nil {
		return m.gone(ctx, id, exec, err)
	}
	cur, _, err := exec.Load(ctx)
	if err != nil {
		return m.gone(ctx, id, exec, err)
	}
	if m.c.Roles.Table().IsTerminal(cur) {
		m.drop(ctx, id, exec)
		return reconcile.Result{}, nil
	}
	step, err := m.c.Sync(ctx, exec, cur)
	if err != nil {
		return reconcile.Result{}, err
	}
	if step.Ended {
		return m.end(ctx, id, exec, step.Ending)
	}
	res := reconcile.Result{RequeueAfter: step.After}
	if after, _, err := exec.Load(ctx); err == nil && after != cur {
		return reconcile.Result{RequeueAfter: atOnce}, nil // moved: sync it where it is now
	}
	if _, wait, err := m.decider.Advance(ctx, exec); err == nil && wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return res, nil
}

// gone lets exec go if err says its record is gone (deleted, retired):
// nothing is left to drive. Any other error is the sync's, retried.
func (m *manager[S]) gone(ctx context.Context, id string, exec *transition.Persisted[S], err error) (reconcile.Result, error) {
	if errors.Is(err, storage.ErrNotFound) {
		m.drop(ctx, id, exec)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// atOnce is the smallest delay the Loop takes: an execution synced again
// at once.
const atOnce = time.Nanosecond

// end writes the end the work earned and lets the execution go; one that
// has not ended (a retry, a failure parked) is taken over again at once.
func (m *manager[S]) end(ctx context.Context, id string, exec *transition.Persisted[S], ending recovery.Ending) (reconcile.Result, error) {
	end, err := endWork(ctx, m.decider, exec, ending, m.logFor(id))
	if err != nil {
		return reconcile.Result{}, err
	}
	m.drop(ctx, id, exec)
	if m.c.Roles.Table().IsTerminal(end.To) {
		return reconcile.Result{}, end.ReleaseErr
	}
	return reconcile.Result{RequeueAfter: atOnce}, end.ReleaseErr
}

// drop lets an ended execution go.
func (m *manager[S]) drop(ctx context.Context, id string, exec *transition.Persisted[S]) {
	m.mu.Lock()
	delete(m.driven, id)
	m.mu.Unlock()
	if own := exec.Ownership(); own != nil {
		_ = own.Release(ctx)
	}
}

// handOver is the SIGTERM: every execution handed over (or relocated, or
// shut down, as the policy says), then the leader's lease let go.
func (m *manager[S]) handOver(ctx context.Context) (int, error) {
	m.mu.Lock()
	ids := make([]string, 0, len(m.driven))
	for id := range m.driven {
		ids = append(ids, id)
	}
	execs := maps.Clone(m.driven)
	m.mu.Unlock()
	sort.Strings(ids)
	code := 0
	var errs []error
	for _, id := range ids {
		// The syncs have stopped: no work runs to be stopped.
		exit, err := sigterm(ctx, m.decider, execs[id], nil, m.logFor(id))
		if err != nil {
			m.logFor(id).Error("SIGTERM failed", "err", err)
			errs = append(errs, err)
			code = exitFailed
			continue
		}
		if code != exitFailed {
			code = max(code, exit)
		}
	}
	if m.leader != nil {
		if err := m.leader.Release(ctx); err != nil {
			m.log.Error("letting the leader's lease go failed", "err", err)
			errs = append(errs, fmt.Errorf("run: letting the leader's lease go: %w", err))
			code = exitFailed
		}
	}
	return code, errors.Join(errs...)
}

// defaultHolder is the host name and the process id.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "controller"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

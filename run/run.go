// Package run is a controller's whole life in one call. [Run], over one
// execution, records the table, takes the execution over and decides
// what its stored status means, walks it to its running state, runs the
// work with a context that a SIGTERM, a stop or the loss of the
// ownership cancels, then relocates, shuts down or finishes, and returns
// the exit code the platform needs. [Manage], over many, does the same
// for every execution of a store in a reconcile.Loop (leader-elected,
// watching the store, handing over or relocating on SIGTERM), each
// brought forward by the caller's [Sync]. It is the sequence
// docs/controllers.md walks through, written once; a controller that
// needs another order builds it from packages recovery and transition as
// these do. The examples are whole controllers.
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Work is what the controller does with the execution once it runs, in
// state (its running state, or the one it resumed in). It returns how
// the work ended: finished, with failures, with an error, or not finished
// because ctx was cancelled (a SIGTERM that shuts down, a stop, the
// ownership lost); the harness writes the end that earns
// (recovery.Decider.End). Work whose roles name no Ends, because only
// the work knows how it ended (a scheduler's succeeded or failed), moves
// the execution to its end itself (exec.Fire) before it returns; the
// harness keeps the end it finds. It must return soon after ctx is
// cancelled.
type Work[S comparable] func(ctx context.Context, exec *transition.Persisted[S], state S) recovery.Ending

// Config is what [Run] needs. Roles, Store, ID, Platform and Work are
// required; the rest have the defaults their comments give.
type Config[S comparable] struct {
	// Roles are the table's roles (teraslice.Roles() for Teraslice's).
	Roles *recovery.Roles[S]
	// Store keeps the execution.
	Store storage.Store
	// ID is the execution's.
	ID string
	// Table, if set, is the name the table is recorded under
	// (schema.Save) before anything else, so tools read it and a table
	// that would strand a record is refused here. "" records nothing.
	Table string
	// Holder names this process as the execution's owner: unique to it.
	// "" is the host name and the process id.
	Holder string
	// Platform is what runs the controller (recovery.KubernetesJob, ...):
	// it decides what a crash and a SIGTERM mean, and the exit codes.
	Platform recovery.Platform
	// Resumable says that the work can be taken up again where it was,
	// after a crash or a relocation. False: a crash fails the execution
	// and a SIGTERM shuts it down (that is what a forgotten field means,
	// so it is said here, not implied).
	Resumable bool
	// Failovers are the unexpected restarts resumed before the execution
	// fails (recovery.Policy.Failovers); the zero Allowance resumes none.
	Failovers recovery.Allowance
	// TTL is the ownership's lease (storage.Lease.TTL); zero is the
	// store's default.
	TTL time.Duration
	// Running is the state a start walks the execution to before the
	// work runs; the zero state is the first running state reachable
	// from the table's initial one.
	Running S
	// Work runs the execution.
	Work Work[S]
	// Signals brings the SIGTERMs; nil is this process's SIGTERM and
	// SIGINT.
	Signals <-chan os.Signal
	// StopCheck is how often the record is read while the work runs, to
	// see a stop (or any move another writer made): zero is a second; a
	// negative one never reads.
	StopCheck time.Duration
	// Observers are told every move and decision (prom.RunObservers
	// makes all of them at once); a single Run syncs nothing, so
	// Reconciles and Adoptions are not told.
	Observers Observers[S]
	// Logger is told each step at Info (what was decided on the
	// execution and why, the SIGTERM's action, the end written), a
	// record each with the execution's id; a lost ownership at Warn. Nil
	// is slog.Default(); slog.New(slog.DiscardHandler) logs nothing.
	Logger *slog.Logger
}

// Observers are what the harness tells of its work: each is optional.
type Observers[S comparable] struct {
	// Moves are told every move of every execution (prom's Transitions).
	Moves transition.Observers[S]
	// Decisions are told what each decision carried out.
	Decisions recovery.Observer[S]
	// Reconciles are told each sync of a manager's Loop.
	Reconciles reconcile.ReconcileObserver[string]
	// Adoptions are told each adoption pass of a manager's Loop.
	Adoptions reconcile.AdoptionObserver[string]
}

// ErrInvalidConfig is matched by the error [Run] returns for a Config it
// cannot run with; nothing is read or written then.
var ErrInvalidConfig = errors.New("invalid run config")

// exitFailed is the exit code of a controller that could not do its part
// (the store unreachable, a table refused): the platform should try again.
const exitFailed = 1

// Run is the controller's life over the execution c.ID; it returns the
// exit code the process should exit with, and the error that cut it
// short, if any (the exit code is then what the platform needs all the
// same: 1 where trying again may help).
//
// The exit codes, as docs/controllers.md's table has them: 0 when the
// execution's outcome is in its record (an end written or kept, a start
// refused or failed, a stop finished, a record of another table left
// alone) or the record is gone (retired once it had ended); Platform.RelocateExitCode (143) after a relocation;
// recovery.Policy.LeaveExitCode after leaving an execution another
// controller holds; 1 when the controller could not do its part.
func Run[S comparable](ctx context.Context, c Config[S]) (int, error) {
	h, err := newHarness(c)
	if err != nil {
		return exitFailed, err
	}
	signals, stop := signalsOr(c.Signals)
	defer stop()
	h.signals = signals
	if err := recordTable(ctx, c.Store, c.Table, c.Roles); err != nil {
		return exitFailed, err
	}
	return h.run(ctx)
}

// signalsOr returns signals, or this process's SIGTERM and SIGINT when it
// is nil, and what stops them coming.
func signalsOr(signals <-chan os.Signal) (<-chan os.Signal, func()) {
	if signals != nil {
		return signals, func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	return ch, func() { signal.Stop(ch) }
}

// recordTable records roles' table under name, if there is one.
func recordTable[S comparable](ctx context.Context, store storage.Store, name string, roles *recovery.Roles[S]) error {
	if name == "" {
		return nil
	}
	if _, err := schema.Save(ctx, store, name, roles); err != nil {
		return fmt.Errorf("run: recording the table: %w", err)
	}
	return nil
}

// harness is one Run.
type harness[S comparable] struct {
	c       Config[S]
	decider *recovery.Decider[S]
	policy  recovery.Policy
	exec    *transition.Persisted[S]
	lease   storage.Lease
	signals <-chan os.Signal
	log     *slog.Logger // Config.Logger, with the execution's id
}

func newHarness[S comparable](c Config[S]) (*harness[S], error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("run: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	var zero S
	switch {
	case c.Roles == nil:
		return nil, bad("no Roles (teraslice.Roles() for Teraslice's lifecycle, or recovery.DefineRoles for your table)")
	case c.Store == nil:
		return nil, bad("no Store")
	case c.Work == nil:
		return nil, bad("no Work: give Config.Work, the function that runs the execution")
	case c.ID == "":
		return nil, bad("no ID: the execution to run")
	case c.TTL != 0 && (c.TTL < storage.MinLeaseTTL || c.TTL > storage.MaxLeaseTTL):
		return nil, bad("TTL %v, want %v to %v (0: the store's default)", c.TTL, storage.MinLeaseTTL, storage.MaxLeaseTTL)
	}
	t := c.Roles.Table()
	if c.Running == zero {
		r, ok := c.Roles.FirstRunning()
		if !ok {
			return nil, bad("no running state can be reached from the initial state %v: give Running", t.Initial())
		}
		c.Running = r
	} else if role, ok := c.Roles.Role(c.Running); !ok || role != recovery.RoleRunning {
		return nil, bad("Running %v is not a running state of the roles", c.Running)
	}
	if c.Holder == "" {
		c.Holder = defaultHolder()
	}
	if c.StopCheck == 0 {
		c.StopCheck = time.Second
	}
	policy := workPolicy(c.Platform, c.Resumable, c.Failovers)
	d, err := recovery.NewDecider(c.Roles, policy)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	exec, err := transition.NewPersisted(t, c.Store, c.ID, transition.PersistedOptions{Actor: c.Holder}, c.Observers.Moves)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	return &harness[S]{c: c, decider: d.WithObserver(c.Observers.Decisions), policy: policy, exec: exec,
		lease: storage.Lease{Holder: c.Holder, TTL: c.TTL, Wait: true, Reason: "controller " + c.Holder + " started"},
		log:   loggerOr(c.Logger).With(executionKey, c.ID)}, nil
}

// loggerOr is logger, or slog.Default() when it is nil.
func loggerOr(logger *slog.Logger) *slog.Logger {
	if logger == nil {
		return slog.Default()
	}
	return logger
}

// executionKey is the attribute of the execution's id in every record
// the harness logs.
const executionKey = "execution"

// run starts, runs and ends; after a lost ownership it starts again.
func (h *harness[S]) run(ctx context.Context) (int, error) {
	for {
		code, again, err := h.once(ctx)
		if !again {
			return code, err
		}
		h.log.Warn("the ownership was lost while the work ran; starting again")
	}
}

// once is one start and what follows; again says the ownership was lost
// while the work ran, and the controller starts again.
func (h *harness[S]) once(ctx context.Context) (code int, again bool, err error) {
	startCtx, cancel := h.untilSignal(ctx)
	v, err := h.decider.Start(startCtx, h.exec, h.lease)
	signalled := cancel()
	switch {
	case errors.Is(err, recovery.ErrTerminalStatus):
		h.log.Info("nothing to run: the execution has ended", "reason", v.Reason)
		return 0, false, nil
	case errors.Is(err, recovery.ErrForeignStatus):
		h.log.Info("left: its status is not the table's", "err", err)
		return 0, false, nil
	case errors.Is(err, storage.ErrNotFound):
		// Retired or deleted once it had ended (a record is never
		// deleted while a controller holds it): nothing left to run, and
		// a platform that restarts failures must not restart this.
		h.log.Info("nothing to run: no record (retired or deleted)")
		return 0, false, nil
	case errors.Is(err, storage.ErrHeld):
		// Gave up waiting for a live holder (a SIGTERM, or ctx): not
		// this controller's execution, but not over either.
		h.log.Info("left: held by another", "err", err)
		return h.policy.LeaveExitCode(), false, nil
	case signalled && err != nil:
		return h.policy.LeaveExitCode(), false, nil
	case err != nil:
		return exitFailed, false, fmt.Errorf("run: start of %s: %w", h.c.ID, err)
	}
	h.log.Info("decided", "decision", v.Decision, "reason", v.Reason)
	if signalled {
		// A SIGTERM while starting: decided on now, before anything runs.
		return h.terminate(ctx, nil)
	}
	switch v.Decision {
	case recovery.DecisionStart:
		if _, err := h.exec.Walk(ctx, h.c.Running, "set up"); err != nil {
			return h.afterSetupFailed(ctx, err)
		}
		return h.work(ctx, h.c.Running)
	case recovery.DecisionResume:
		return h.work(ctx, v.To)
	case recovery.DecisionStop:
		return h.finish(ctx, recovery.Ending{})
	case recovery.DecisionWait:
		return h.wait(ctx, v)
	}
	// Fail, End: the outcome is written.
	return 0, false, h.release(ctx)
}

// afterSetupFailed decides on a walk to the running state that did not
// arrive: a stop or another writer moved the record meanwhile.
func (h *harness[S]) afterSetupFailed(ctx context.Context, err error) (int, bool, error) {
	if errors.Is(err, storage.ErrFenced) {
		return h.policy.LeaveExitCode(), false, nil
	}
	if errors.Is(err, transition.ErrNotAllowed) {
		h.log.Info("set-up interrupted: the record was moved meanwhile", "err", err)
		return h.finish(ctx, recovery.Ending{})
	}
	return exitFailed, false, fmt.Errorf("run: set-up of %s: %w", h.c.ID, err)
}

// wait holds a parked execution, or one whose backoff runs, until it is
// moved on (or the backoff is over), then starts again.
func (h *harness[S]) wait(ctx context.Context, v recovery.Verdict[S]) (int, bool, error) {
	tick, stop := h.ticker()
	defer stop()
	lost := h.exec.Ownership().Lost()
	for {
		if !v.Until.IsZero() && !time.Now().Before(v.Until) {
			if _, _, err := h.decider.Advance(ctx, h.exec); err != nil {
				return exitFailed, false, fmt.Errorf("run: %s: %w", h.c.ID, err)
			}
			return 0, true, nil
		}
		select {
		case <-ctx.Done():
			return h.policy.LeaveExitCode(), false, h.release(context.WithoutCancel(ctx))
		case <-h.signals:
			return h.terminate(ctx, nil)
		case <-lost:
			return 0, true, nil
		case <-tick:
		}
		cur, _, err := h.exec.Load(ctx)
		if err == nil && cur != v.To {
			return 0, true, nil // moved on: decide again
		}
	}
}

// ticker ticks every StopCheck, or never when it is negative.
func (h *harness[S]) ticker() (<-chan time.Time, func()) {
	if h.c.StopCheck < 0 {
		return nil, func() {}
	}
	t := time.NewTicker(h.c.StopCheck)
	return t.C, t.Stop
}

// work runs the work in state until it returns, a SIGTERM comes, a stop
// is written or the ownership is lost.
func (h *harness[S]) work(ctx context.Context, state S) (int, bool, error) {
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan recovery.Ending, 1)
	go func() { done <- h.c.Work(workCtx, h.exec, state) }()
	tick, stop := h.ticker()
	defer stop()
	lost := h.exec.Ownership().Lost()
	for {
		select {
		case ending := <-done:
			return h.finish(ctx, ending)
		case <-h.signals:
			return h.terminate(ctx, func() recovery.Ending { cancel(); return <-done })
		case <-lost:
			cancel()
			<-done
			return 0, true, nil
		case <-ctx.Done():
			cancel()
			<-done
			return h.policy.LeaveExitCode(), false, h.release(context.WithoutCancel(ctx))
		case <-tick:
			if h.stopped(ctx) {
				cancel()
				return h.finish(ctx, <-done)
			}
		}
	}
}

// stopped reports whether the record is in a stopping state now.
func (h *harness[S]) stopped(ctx context.Context) bool {
	cur, _, err := h.exec.Load(ctx)
	if err != nil {
		return false
	}
	role, _ := h.c.Roles.Role(cur)
	return role == recovery.RoleStopping
}

// terminate is a SIGTERM (see sigterm); stopWork stops the work and
// returns how it ended, nil when no work runs.
func (h *harness[S]) terminate(ctx context.Context, stopWork func() recovery.Ending) (int, bool, error) {
	code, err := sigterm(context.WithoutCancel(ctx), h.decider, h.exec, stopWork, h.log)
	return code, false, err
}

// finish writes the end the work earned and lets the execution go.
func (h *harness[S]) finish(ctx context.Context, ending recovery.Ending) (int, bool, error) {
	end, err := endWork(context.WithoutCancel(ctx), h.decider, h.exec, ending, h.log)
	if err != nil {
		return exitFailed, false, err
	}
	return end.ExitCode, false, end.ReleaseErr
}

// workPolicy is the policy of a controller whose process runs the work:
// Run's, and a Manage's without HandOver.
func workPolicy(platform recovery.Platform, resumable bool, failovers recovery.Allowance) recovery.Policy {
	return recovery.Policy{Platform: platform, Work: recovery.Restartability(resumable), Failovers: failovers}
}

// sigterm carries a SIGTERM out on exec, for Run and for each execution
// of a Manage: Decider.Terminate relocates, leaves or hands it over (the
// work abandoned), or shuts it down (the work stopped, then its end
// written). stopWork stops the work and returns how it ended; nil when no
// work runs. It returns the exit code the platform needs, and what went
// wrong (the code is then 1 where the controller could not do its part).
func sigterm[S comparable](ctx context.Context, d *recovery.Decider[S], exec *transition.Persisted[S],
	stopWork func() recovery.Ending, log *slog.Logger) (int, error) {
	a, err := d.Terminate(ctx, exec, nil)
	if err != nil {
		return exitFailed, fmt.Errorf("run: SIGTERM for %s: %w", exec.ID(), err)
	}
	log.Info("SIGTERM", "action", a.Kind, "reason", a.Reason)
	if a.Kind != recovery.ActionShutdown {
		if stopWork != nil {
			stopWork()
		}
		return a.ExitCode, errors.Join(a.CheckpointErr, a.ReleaseErr)
	}
	ending := recovery.Ending{}
	if stopWork != nil {
		ending = stopWork()
	}
	end, err := endWork(ctx, d, exec, ending, log)
	if err != nil {
		return exitFailed, err
	}
	return end.ExitCode, end.ReleaseErr
}

// endWork writes the end the work earned (Decider.End), which lets the
// execution go, and says so.
func endWork[S comparable](ctx context.Context, d *recovery.Decider[S], exec *transition.Persisted[S],
	ending recovery.Ending, log *slog.Logger) (recovery.Outcome[S], error) {
	end, err := d.End(ctx, exec, ending, nil)
	if err != nil {
		return end, fmt.Errorf("run: finishing %s: %w", exec.ID(), err)
	}
	log.Info("ended", "outcome", end.Kind, "state", end.To, "reason", end.Reason)
	return end, nil
}

// release lets the execution go, if the start left it held.
func (h *harness[S]) release(ctx context.Context) error {
	if own := h.exec.Ownership(); own != nil {
		return own.Release(ctx)
	}
	return nil
}

// untilSignal returns ctx, cancelled by a signal too; its cancel reports
// whether a signal came.
func (h *harness[S]) untilSignal(ctx context.Context) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	got := make(chan bool, 1)
	go func() {
		select {
		case <-h.signals:
			cancel()
			got <- true
		case <-stop:
			got <- false
		}
	}()
	return ctx, func() bool {
		close(stop)
		signalled := <-got
		cancel()
		return signalled
	}
}

package teraslice

import (
	"sync"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/transition"
)

// LifecycleBuilder returns a builder holding every edge of the execution
// lifecycle, for a caller who wants to add guards before building (see
// the example). This is the one place the lifecycle is written down; [Lifecycle] builds
// it. Each edge says who takes it, after Teraslice's cluster master
// (execution service), execution controller and slice watchdog.
func LifecycleBuilder() *transition.Builder[state.Status] {
	b := transition.New(state.Pending).
		States(state.Pending, state.Scheduling, state.Initializing, state.Running, state.Recovering, state.Relocating, state.Failing,
			state.Paused, state.Stopping, state.Completed, state.Stopped, state.Rejected, state.Failed, state.Terminated)

	// The cluster master's allocator dequeues a pending execution; it may
	// refuse it outright; a user may stop it before it is scheduled.
	b.Allow(state.Pending, state.Scheduling, state.Rejected, state.Stopping)

	// The allocator places the execution controller (Initializing), or
	// placement fails (Failed) or is refused (Rejected); a stop request
	// can arrive meanwhile.
	b.Allow(state.Scheduling, state.Initializing, state.Failed, state.Rejected, state.Stopping)

	// The controller starts producing work (Running), or first recovers
	// an earlier execution's unfinished work (Recovering); its setup
	// fails (Failed); a stop arrives (Stopping); it is shut down before
	// it got going (Terminated).
	b.Allow(state.Initializing, state.Running, state.Recovering, state.Failed, state.Stopping, state.Terminated)

	// From Running: the slice watchdog sees failures (Failing); the
	// cluster master pauses (Paused) or stops (Stopping); the platform
	// moves the controller (Relocating, set by its SIGTERM handler); the
	// work ends well (Completed) or with errors (Failed); the controller
	// is shut down before the work could finish (Terminated).
	b.Allow(state.Running, state.Failing, state.Paused, state.Stopping, state.Relocating, state.Completed, state.Failed, state.Terminated)

	// Recovering: the recovered work is done and normal work goes on
	// (Running), otherwise as Running. Pausing is allowed here too.
	b.Allow(state.Recovering, state.Running, state.Failing, state.Paused, state.Stopping, state.Relocating, state.Completed, state.Failed, state.Terminated)

	// Failing: the watchdog's probation ends well and the controller goes
	// back to what it was doing (Running or Recovering), or the work ends
	// with errors (Failed); pause, stop, relocation and shutdown as above.
	// The work may also end while on probation with no slice left failed
	// (the failures were retried): Completed, as Teraslice's controller
	// writes whatever running status it finds (recovery.End decides).
	b.Allow(state.Failing, state.Running, state.Recovering, state.Paused, state.Stopping, state.Relocating, state.Completed, state.Failed, state.Terminated)

	// Paused: the cluster master resumes (Running) or stops (Stopping);
	// the paused controller is relocated (Relocating), fails (Failed) or
	// is shut down (Terminated). The work may also finish while paused
	// (Completed): a pause stops dispatching new slices, not the ones
	// already dispatched, so a once job whose last slices were out when it
	// was paused completes paused, and Teraslice's controller writes
	// completed. Refusing it would leave the record paused, and the
	// cluster master would turn it into failed when the controller exits.
	b.Allow(state.Paused, state.Running, state.Stopping, state.Relocating, state.Completed, state.Failed, state.Terminated)

	// Stopping: the controller finishes in-flight work (Stopped), or the
	// work happened to finish first (Completed: Teraslice accepts this);
	// a terminal error while stopping (Failed); the cluster shuts down
	// (Terminated). Never Relocating: a SIGTERM while stopping means
	// "shut down".
	b.Allow(state.Stopping, state.Stopped, state.Completed, state.Failed, state.Terminated)

	// Relocating: the new controller, after taking the execution over,
	// returns to the status it was relocated from and only that one.
	b.Return(state.Relocating, state.Running, state.Recovering, state.Failing, state.Paused)
	// The new controller re-runs its setup instead (Initializing: the one
	// way from a running status back to an init status, because a moved
	// controller starts from scratch); the relocation deadline passes
	// with nobody taking over (Failed, set by the deadline reconciler);
	// the cluster master stops it meanwhile (Stopping); the cluster shuts
	// down (Terminated).
	b.Allow(state.Relocating, state.Initializing, state.Failed, state.Stopping, state.Terminated)

	// No edge leaves a terminal status. (Teraslice lets a stopped
	// execution become completed when its slicer finishes late; here the
	// controller must see Stopping and write Completed from there.)
	b.Terminal(state.Completed, state.Stopped, state.Rejected, state.Failed, state.Terminated)
	return b
}

var lifecycle = sync.OnceValues(func() (*transition.Table[state.Status], error) {
	return LifecycleBuilder().Build()
})

// Lifecycle returns the canonical execution table, without guards. It is
// built once and shared; a Table is immutable, so sharing is safe.
func Lifecycle() *transition.Table[state.Status] {
	t, err := lifecycle()
	if err != nil {
		// The table is a constant of this package and its tests build it;
		// failing here means the package itself is broken.
		panic("teraslice: the lifecycle table does not build: " + err.Error())
	}
	return t
}

var roles = sync.OnceValues(func() (*recovery.Roles[state.Status], error) { return RolesBuilder().Build() })

// RolesBuilder returns the builder of Roles, to add what a deployment
// chooses for itself before Build: how long ended executions are kept
// (Retain), timers of its own.
func RolesBuilder() *recovery.RolesBuilder[state.Status] {
	return recovery.DefineRoles(Lifecycle()).
		NotStarted(state.Pending, state.Scheduling, state.Initializing).
		Running(state.Running, state.Recovering, state.Failing, state.Paused).
		// A relocated controller returns to the status it left, or when
		// the record does not say, re-runs its setup.
		Relocating(state.Relocating, state.Initializing).
		Stopping(state.Stopping, state.Stopped).
		Ends(state.Completed, state.Terminated).
		Failed(state.Failed).
		// Nothing retries these when the cluster master or the controller
		// dies in them (Teraslice re-queues only pending executions), so
		// they end by deadline, like Teraslice's slicer_timeout.
		Deadline(state.Scheduling, StrandedAfter, state.Failed).
		Deadline(state.Initializing, StrandedAfter, state.Failed).
		Deadline(state.Relocating, RelocatingDeadline, state.Failed).
		Deadline(state.Stopping, StoppingDeadline, state.Stopped)
}

// Teraslice's times, spelled out: nothing in package recovery implies them.
const (
	// StrandedAfter is how long an execution may stay scheduling or
	// initializing: past it, recovery.Reaper fails it (the placement or
	// the controller's setup never finished, and nothing retries them).
	// A controller that starts before the reaper gets there takes it
	// normally.
	StrandedAfter = 10 * time.Minute
	// RelocatingDeadline is how long a relocation may wait for a
	// controller to take over before it fails: longer than the longest
	// wait Kubernetes' Job controller puts between a failed pod and its
	// replacement, ten minutes, plus a pod's start, so a quick run of
	// node drains does not fail a healthy execution.
	RelocatingDeadline = 15 * time.Minute
	// StoppingDeadline is how long a stop may take before it is
	// considered done, in stopped (Teraslice's cluster master reaps stuck
	// stopping executions after its shutdown timeout the same way).
	StoppingDeadline = 5 * time.Minute
	// AbandonedAfter is how long a running execution may go on with no
	// live holder before a recovery.Reaper fails it
	// (recovery.ReaperOptions.Abandoned): as long as a relocation may
	// wait, for the same reason, a controller killed unasked being
	// replaced by its platform within that time.
	AbandonedAfter = RelocatingDeadline
)

// Failovers are the unexpected restarts of a controller (OOM kills, lost
// nodes) Teraslice's platform is allowed before the execution fails
// (recovery.Policy.Failovers): three within thirty minutes.
var Failovers = recovery.Allowance{Count: 3, Window: 30 * time.Minute}

// Roles returns what each status means to the decisions of package
// recovery: the init statuses are not started; running, recovering,
// failing and paused are running; relocating is the return state a
// relocation writes (a record without its previous status restarts in
// initializing); stopping ends in stopped; work that finished writes
// completed, work shut down before it finished terminated; a failure
// writes failed; scheduling and initializing have deadlines
// (StrandedAfter), relocating (RelocatingDeadline, then failed) and
// stopping (StoppingDeadline, then stopped) too; the terminal statuses
// are terminal. Pass it to recovery.Startup,
// Terminate, their Apply helpers and the Reaper. Built once and shared;
// Roles are immutable.
func Roles() *recovery.Roles[state.Status] {
	r, err := roles()
	if err != nil {
		// The roles are constants of this package and its tests build
		// them; failing here means the package itself is broken.
		panic("teraslice: the lifecycle's roles do not build: " + err.Error())
	}
	return r
}

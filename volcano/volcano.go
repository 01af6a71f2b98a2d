// Package volcano is the preset of Volcano's batch Job lifecycle
// (volcano.sh/volcano, pkg/controllers/job/state): its phases as a state
// type ([Phase]), its state machine as a transition table ([Lifecycle]),
// and what each phase means to the decisions of package recovery
// ([Roles]) for a controller-manager that drives every Job while the
// Jobs' pods run without it (recovery.Policy.Manager).
//
// What Volcano's lifecycle needs of execfsm, and where it is:
//
//   - A Job is created with an empty phase, which is Pending: the table
//     aliases "" to Pending (transition.Builder.Alias).
//   - Three drains, each with its own end: Terminating → Terminated (the
//     stop an outside authority asks for), Aborting → Aborted, Completing
//     → Completed; and Restarting, which drains back to Pending.
//   - Aborted is a suspended Job: parked, started by nothing but a user's
//     ResumeJob, ended by no deadline.
//   - RetryCount: every move into Restarting counts a retry, in the same
//     write, whoever makes it ([Retries], transition.Builder.Count); the
//     retries budget fails a Restarting Job that has restarted maxRetry
//     times. A Job's own maxRetry is its limit ([MaxRetry]); without one,
//     [DefaultMaxRetry].
//
// The state machine's actions (what each phase does on AbortJob,
// RestartJob, a sync with its pods' counts) are the controller's code:
// examples/volcano has them, checked against every case of Volcano's own
// unit tests.
package volcano

import (
	"strconv"
	"sync"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
)

// Phase is a Volcano Job's phase (batch/v1alpha1 JobPhase).
type Phase string

// Volcano's Job phases.
const (
	Pending     Phase = "Pending"
	Running     Phase = "Running"
	Restarting  Phase = "Restarting"
	Aborting    Phase = "Aborting"
	Aborted     Phase = "Aborted"
	Completing  Phase = "Completing"
	Completed   Phase = "Completed"
	Terminating Phase = "Terminating"
	Terminated  Phase = "Terminated"
	Failed      Phase = "Failed"
)

// Retries is the counter of a Job's restarts, Volcano's RetryCount: every
// move into Restarting adds to it.
const Retries = "retries"

// DefaultMaxRetry is a Job's maxRetry when its spec leaves it out, as
// Volcano's API defaults it.
const DefaultMaxRetry = 3

// LifecycleBuilder returns a builder holding Volcano's state machine, for
// a caller who adds guards before building. [Lifecycle] builds it.
func LifecycleBuilder() *transition.Builder[Phase] {
	return transition.New(Pending).
		States(Pending, Running, Restarting, Aborting, Aborted, Completing, Completed, Terminating, Terminated, Failed).
		// RestartJob, AbortJob, CompleteJob, TerminateJob kill a pending
		// Job's pods and drain; a sync with enough pods running runs it.
		Allow(Pending, Running, Restarting, Aborting, Completing, Terminating).
		// A running Job also goes back to Pending when too many of its
		// pods are pending, and ends once every pod has finished.
		Allow(Running, Pending, Restarting, Aborting, Completing, Terminating, Completed, Failed).
		// A restart drains back to Pending, or fails past maxRetry.
		Allow(Restarting, Pending, Failed).
		Allow(Aborting, Aborted, Restarting).
		// ResumeJob restarts a suspended Job.
		Allow(Aborted, Restarting).
		Allow(Completing, Completed).
		Allow(Terminating, Terminated).
		Terminal(Completed, Terminated, Failed).
		Alias(Pending, "").
		Count(Retries, Pending, Restarting).
		Count(Retries, Running, Restarting).
		Count(Retries, Aborting, Restarting).
		Count(Retries, Aborted, Restarting)
}

var lifecycle = sync.OnceValues(func() (*transition.Table[Phase], error) {
	return LifecycleBuilder().Build()
})

// Lifecycle returns Volcano's Job table. It is built once and shared; a
// Table is immutable.
func Lifecycle() *transition.Table[Phase] {
	t, err := lifecycle()
	if err != nil {
		// The table is a constant of this package and its tests build it;
		// failing here means the package itself is broken.
		panic("volcano: the lifecycle table does not build: " + err.Error())
	}
	return t
}

// RolesBuilder returns a builder holding the roles [Roles] builds, for a
// caller who adds timers or budgets first (a job-wide deadline).
func RolesBuilder() *recovery.RolesBuilder[Phase] {
	return recovery.DefineRoles(Lifecycle()).
		NotStarted(Pending).
		Running(Running).
		Stopping(Terminating, Terminated).
		Stopping(Aborting, Aborted).
		Stopping(Completing, Completed).
		Stopping(Restarting, Pending).
		Parked(Aborted).
		Failed(Failed).
		Budget(recovery.Budget[Phase]{Counter: Retries, Allowance: recovery.Allowance{Count: DefaultMaxRetry - 1}, Exhausted: Failed})
}

var roles = sync.OnceValues(func() (*recovery.Roles[Phase], error) { return RolesBuilder().Build() })

// Roles returns what each phase means to the decisions of package
// recovery: Pending is not started; Running runs; Terminating (the stop an
// outside authority asks for), Aborting, Completing and Restarting drain,
// each to its own end; Aborted is parked; a failure writes Failed; the
// retries budget allows DefaultMaxRetry-1 restarts (a Job's own maxRetry
// through [MaxRetry]). No phase has a timer: Volcano has none. Use it with
// recovery.Policy{Manager: true}. Built once and shared.
func Roles() *recovery.Roles[Phase] {
	r, err := roles()
	if err != nil {
		// The roles are constants of this package and its tests build
		// them; failing here means the package itself is broken.
		panic("volcano: the lifecycle's roles do not build: " + err.Error())
	}
	return r
}

// MaxRetry returns the metadata that gives a Job its own maxRetry (from
// its spec), to write when its record is created: maxRetry restarts fail
// it, so maxRetry-1 are allowed, and maxRetry 1 retries nothing. A
// maxRetry below 1 is Volcano's default: no metadata.
func MaxRetry(maxRetry int) map[string]string {
	if maxRetry < 1 {
		return nil
	}
	return map[string]string{recovery.LimitKey(Retries): strconv.Itoa(maxRetry - 1)}
}

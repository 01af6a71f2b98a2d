package recovery

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// Restartable is implemented by work (a slicer, a simulator driver) that
// can be picked up by a new controller process without losing anything:
// its progress is checkpointed outside the process. It mirrors
// Teraslice's slicer().isRestartable(), later isRelocatable(). Work that
// does not say so is not restartable: an older asset never asked to
// survive a move is not assumed to.
type Restartable interface {
	IsRestartable() bool
}

// Restartability is a [Restartable] that says what it is: for work whose
// restartability is known as a plain value (a flag in a job's config).
type Restartability bool

// IsRestartable implements [Restartable].
func (r Restartability) IsRestartable() bool { return bool(r) }

// MetaRelocatable is the record metadata key under which an execution
// carries whether its work can be restarted elsewhere ("true" or
// "false"; Teraslice's relocatable flag), so that operators, drain tooling
// and a controller that cannot ask its work yet can see it. The cluster
// master records it when it creates the execution (it validated the
// job); [Decider.Start] refreshes it from [Policy].Work. The kube store
// mirrors it in a label beside the status label.
const MetaRelocatable = "execfsm.relocatable"

// AsRecorded is the [Policy].Work of a controller that cannot ask its
// work yet (it has not loaded it): the flag recorded on the execution
// ([MetaRelocatable]) answers, and without one the work is not
// restartable. Said at the call so that a forgotten Work is an error, not
// a silent "not restartable".
var AsRecorded Restartable = asRecorded{}

type asRecorded struct{}

func (asRecorded) IsRestartable() bool { return false }

// askable reports whether work answers for itself.
func askable(work Restartable) bool {
	_, recorded := work.(asRecorded)
	return work != nil && !recorded
}

// RecordedRestartability returns the flag recorded on rec under
// [MetaRelocatable], and false if none is (or it is neither "true" nor
// "false").
func RecordedRestartability(rec storage.Record) (Restartability, bool) {
	switch rec.Meta[MetaRelocatable] {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// restartability says whether the work of the execution in rec can be
// restarted, and why: the work itself when the policy has it, otherwise
// the flag recorded on the execution (the controller has not loaded its
// work yet, or cannot ask it), otherwise not.
func restartability(work Restartable, rec storage.Record) (bool, string) {
	if askable(work) {
		if work.IsRestartable() {
			return true, ""
		}
		return false, "the work is not restartable"
	}
	recorded, ok := RecordedRestartability(rec)
	switch {
	case !ok && rec.Meta[MetaRelocatable] != "":
		return false, fmt.Sprintf("the recorded %s=%.16q is neither true nor false, and the policy has no Work to ask", MetaRelocatable, rec.Meta[MetaRelocatable])
	case !ok:
		return false, "nothing says the work is restartable (no Work in the policy, no " + MetaRelocatable + " recorded)"
	case !bool(recorded):
		return false, "the execution's recorded flag says its work is not restartable"
	}
	return true, ""
}

// DefaultRelocateExitCode is the exit status of a relocating controller
// when [Platform].RelocateExitCode is zero: 128 + SIGTERM, "terminated by
// signal", not success. (An exit code of 0 there is never right, so zero
// can stand for it.)
const DefaultRelocateExitCode = 143

// Allowance is how many of something an execution may have: at most
// Count within Window. A zero Count allows none; a zero Window counts
// over the execution's whole life; Unlimited allows any number (Count
// and Window then say nothing). Nothing is implied: a zero Allowance
// allows nothing.
type Allowance struct {
	Count     int
	Window    time.Duration
	Unlimited bool
}

// String says the allowance as people read it: "3 within 30m0s",
// "2 ever", "unlimited".
func (a Allowance) String() string {
	switch {
	case a.Unlimited:
		return "unlimited"
	case a.Window == 0:
		return fmt.Sprintf("%d ever", a.Count)
	}
	return fmt.Sprintf("%d within %v", a.Count, a.Window)
}

// check says what is wrong with a, named what, or nil.
func (a Allowance) check(what string) error {
	switch {
	case a.Unlimited:
		return nil
	case a.Count < 0:
		return fmt.Errorf("recovery: %w: %s.Count %d is negative", ErrInvalidPolicy, what, a.Count)
	case a.Window < 0:
		return fmt.Errorf("recovery: %w: %s.Window %v is negative", ErrInvalidPolicy, what, a.Window)
	}
	return nil
}

// ErrInvalidPolicy is matched by the error for a [Policy] that cannot be
// honoured, and for a question about a budget the roles do not give;
// nothing is decided or written with it.
var ErrInvalidPolicy = errors.New("invalid recovery policy")

// Policy is what a controller knows about itself and its platform when it
// decides, on startup or on SIGTERM, what the stored status means. Its
// zero value allows nothing it does not say: no restarts, no failover.
type Policy struct {
	// Platform is what runs the controller: whether it restarts
	// controllers (a running status found at start resumes only where it
	// does), whether its SIGTERM drains (relocates) or stops, and the exit
	// codes it needs. The zero Platform is Unmanaged: no restarts.
	Platform Platform

	// Work is the execution's work; it is restartable if it says so
	// ([Restartability] for a plain flag). [AsRecorded] (a controller
	// that has not loaded its work yet) lets the flag recorded on the
	// execution ([MetaRelocatable]) answer instead; without one, it is
	// not. Required where the Platform restarts or relocates controllers
	// (NewDecider refuses a nil one there, naming these choices); a
	// policy that never resumes anything (Unmanaged, a Reaper's) may
	// leave it nil, which answers as AsRecorded does.
	Work Restartable

	// Failovers is how many unexpected restarts of a controller (a
	// running status found on startup without a relocation: an OOM kill,
	// a lost node) are resumed; the one past them fails the execution.
	// They are a budget of their own, kept in the record's metadata
	// ([MetaFailovers]), apart from the work's failures. The zero
	// Allowance resumes none: the first unexpected restart fails the
	// execution (teraslice.Failovers is Teraslice's: 3 within 30
	// minutes).
	Failovers Allowance

	// Clock is a [Decider]'s clock, read once a decision (nil:
	// time.Now). The pure decisions take the time as an argument.
	Clock func() time.Time

	// Manager: the controller is a manager (an operator, a Volcano
	// controller-manager, a simulator manager) that drives many
	// executions whose work does not run in its process. When it goes,
	// every execution stays as it is: on SIGTERM each is handed over
	// ([ActionHandOver]: its ownership released, nothing written), and
	// the next manager's start takes it over at once, resuming a running
	// execution without counting a failover (the manager's end did not
	// touch the work). A manager's policy leaves Platform, Work and
	// Failovers unset: they are about a controller whose process is the
	// execution's.
	Manager bool
}

// policy is a Policy as the decisions use it: with the time of the
// decision and who is told what the Decider carried out.
type policy[S comparable] struct {
	Policy
	now      time.Time
	Observer Observer[S]
}

// withDefaults checks p against roles and fills in its defaults.
func (p policy[S]) withDefaults(roles *Roles[S]) (policy[S], error) {
	switch {
	case roles == nil:
		return p, fmt.Errorf("recovery: %w: nil roles (teraslice.Roles() for the execution lifecycle)", ErrInvalidPolicy)
	}
	if err := p.Platform.check(); err != nil {
		return p, err
	}
	if err := p.Failovers.check("Failovers"); err != nil {
		return p, err
	}
	if !p.Manager && p.Work == nil && (p.Platform.Restart != RestartNever || p.Platform.Drains) {
		return p, fmt.Errorf("recovery: %w: no Work, and the platform %s restarts or relocates controllers: say whether the work can resume "+
			"(Work: recovery.Restartability(true), or false), give the work itself (a Restartable), or Work: recovery.AsRecorded to read the flag recorded on the execution", ErrInvalidPolicy, cmp.Or(p.Platform.Name, fmt.Sprintf("%+v", p.Platform)))
	}
	if p.Manager {
		for _, set := range []struct {
			what string
			set  bool
		}{{"Platform", p.Platform != Platform{}}, {"Work", p.Work != nil}, {"Failovers", p.Failovers != Allowance{}}} {
			if set.set {
				return p, fmt.Errorf("recovery: %w: a Manager's policy sets %s, which says nothing for a manager (its executions' work does not run in its process)", ErrInvalidPolicy, set.what)
			}
		}
	}
	return p, nil
}

// at returns p for a decision made at now.
func (p policy[S]) at(now time.Time) policy[S] {
	p.now = now
	return p
}

// clock is the Decider's time.
func (p Policy) clock() time.Time {
	if p.Clock != nil {
		return p.Clock()
	}
	return time.Now()
}

// LeaveExitCode is the exit status of a controller that leaves an
// execution it does not hold ([ActionLeave], [EndLeave], or a start that
// gave up waiting for a live holder). On a platform that restarts only
// after a failure (a Kubernetes Job, systemd's on-failure) it is the
// relocation's, Platform.RelocateExitCode or 143: the controller's part
// is not over, so the platform must start another, which takes the
// execution over once nobody holds it, or refuses it if it has ended. An
// exit 0 there would tell a Kubernetes Job that the controller
// succeeded: the Job completes and replaces nothing, and an execution
// left running under a dead holder, or relocating, waits for the Reaper
// to fail it. Where any exit is restarted, or none is, 0.
func (p Policy) LeaveExitCode() int {
	if p.Platform.Restart != RestartOnFailure {
		return 0
	}
	return p.Platform.relocateExitCode()
}

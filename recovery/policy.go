package recovery

import (
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
	if work != nil {
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

// Defaults for a zero [Policy].
const (
	DefaultRestartBudget    = 3
	DefaultRestartWindow    = 30 * time.Minute
	DefaultRelocateExitCode = 143 // 128 + SIGTERM: "terminated by signal", not success
	MaxRestartBudget        = 100
)

// Deadline says that a state must not last longer than After, counted
// from when the record entered it ([storage.Record.Since]), and which
// state to move it to then.
type Deadline[S comparable] struct {
	After time.Duration
	Then  S
}

// Deadlines maps a state to its deadline. States not in the map may last
// forever. [Roles.DefaultDeadlines] are the usual ones.
type Deadlines[S comparable] map[S]Deadline[S]

// ErrInvalidPolicy is matched by the error for a [Policy] or [Deadlines]
// that cannot be honoured; nothing is decided or written with it.
var ErrInvalidPolicy = errors.New("invalid recovery policy")

// Validate checks that every deadline is positive and moves a state of
// the roles' table, where the table allows, to a state that ends the
// wait: a terminal state, or the roles' Failed or stopped state (a
// simulator's error, or idle after a stop). Moving to another live state
// would only start a new wait.
func (d Deadlines[S]) Validate(roles *Roles[S]) error {
	if roles == nil {
		return fmt.Errorf("recovery: %w: nil roles", ErrInvalidPolicy)
	}
	if problem := d.problem(roles); problem != "" {
		return fmt.Errorf("recovery: %w: %s", ErrInvalidPolicy, problem)
	}
	return nil
}

// problem says what is wrong with d under roles, or "" when nothing is:
// the roles builder reports it among its own problems.
func (d Deadlines[S]) problem(roles *Roles[S]) string {
	t := roles.table
	name := func(s S) string { n, _ := t.Name(s); return n }
	for s, dl := range d {
		role, known := roles.Role(s)
		then, thenKnown := roles.Role(dl.Then)
		switch {
		case !known:
			return fmt.Sprintf("deadline for %q, not a state of the table", name(s))
		case dl.After <= 0:
			return fmt.Sprintf("deadline for %s is %v, want a positive duration", name(s), dl.After)
		case role == RoleTerminal:
			return fmt.Sprintf("deadline for terminal %s, which lasts by definition", name(s))
		case !thenKnown || !t.Allowed(s, dl.Then):
			return fmt.Sprintf("deadline moves %s to %q, which the table does not allow", name(s), name(dl.Then))
		case then != RoleTerminal && !roles.ends(dl.Then):
			return fmt.Sprintf("deadline moves %s to %s, a %s state; want a terminal one or the roles' Failed or stopped state", name(s), name(dl.Then), then)
		}
	}
	return ""
}

// Policy is what a controller knows about itself and its platform when it
// decides, on startup or on SIGTERM, what the stored status means.
type Policy struct {
	// Now is the time of the decision. Startup and Terminate are pure
	// functions, so the clock is an input; a Decider fills it in
	// when it is zero.
	Now time.Time

	// Restarts: the platform restarts or replaces a controller that
	// exits (Teraslice: only the kubernetesV2 backend). Without it, a
	// controller that finds a running status on startup fails the
	// execution, and SIGTERM always means shut down.
	Restarts bool

	// Work is the execution's work; it is restartable if it says so
	// ([Restartability] for a plain flag). When it is nil (the controller
	// has not loaded its work yet) the flag recorded on the execution
	// ([MetaRelocatable]) answers instead; without one, it is not.
	Work Restartable

	// RestartBudget is how many unexpected restarts (a running status
	// found on startup without a relocation: an OOM kill, a lost node)
	// are resumed within RestartWindow; the next one fails the
	// execution. Zero means DefaultRestartBudget; at most
	// MaxRestartBudget. Restarts are counted in the record's metadata.
	RestartBudget int
	RestartWindow time.Duration

	// RelocateExitCode is the exit status a relocating controller exits
	// with; zero means 143. It is never 0: on a Kubernetes Job, a pod
	// whose container exits 0 counts as the Job's success and is not
	// replaced, which would end a relocation with nothing running. See
	// [Action] for what each platform needs.
	RelocateExitCode int
}

// policy is a Policy as the decisions use it: with the roles' deadlines
// (states that must not last; Startup honours them too, so a stale
// relocating record is failed, not resumed) and who is told what the
// Decider carried out.
type policy[S comparable] struct {
	Policy
	Deadlines Deadlines[S]
	Observer  Observer[S]
}

// withDefaults checks p against roles and fills in its defaults and the
// roles' deadlines.
func (p policy[S]) withDefaults(roles *Roles[S]) (policy[S], error) {
	switch {
	case roles == nil:
		return p, fmt.Errorf("recovery: %w: nil roles (teraslice.Roles() for the execution lifecycle)", ErrInvalidPolicy)
	case p.RestartBudget < 0 || p.RestartBudget > MaxRestartBudget:
		return p, fmt.Errorf("recovery: %w: RestartBudget %d, want 0 (default) to %d", ErrInvalidPolicy, p.RestartBudget, MaxRestartBudget)
	case p.RestartWindow < 0:
		return p, fmt.Errorf("recovery: %w: RestartWindow %v is negative", ErrInvalidPolicy, p.RestartWindow)
	case p.RelocateExitCode < 0 || p.RelocateExitCode > 255:
		return p, fmt.Errorf("recovery: %w: RelocateExitCode %d, want 1 to 255 (0: the default)", ErrInvalidPolicy, p.RelocateExitCode)
	case p.Now.IsZero():
		return p, fmt.Errorf("recovery: %w: Now is zero (the decision needs the time)", ErrInvalidPolicy)
	}
	if p.RestartBudget == 0 {
		p.RestartBudget = DefaultRestartBudget
	}
	if p.RestartWindow == 0 {
		p.RestartWindow = DefaultRestartWindow
	}
	if p.RelocateExitCode == 0 {
		p.RelocateExitCode = DefaultRelocateExitCode
	}
	p.Deadlines = roles.DefaultDeadlines()
	return p, nil
}

// LeaveExitCode is the exit status of a controller that leaves an
// execution it does not hold ([ActionLeave], [EndLeave], or a start that
// gave up waiting for a live holder). Where controllers are restarted
// (Restarts) it is the relocation's, RelocateExitCode or its default:
// the controller's part is not over, so the platform must start
// another, which takes the execution over once nobody holds it, or
// refuses it if it has ended. An exit 0 there would tell a Kubernetes
// Job that the controller succeeded: the Job completes and replaces
// nothing, and an execution left running under a dead holder, or
// relocating, waits for the Reaper to fail it. Elsewhere nothing reads
// the status: 0.
func (p Policy) LeaveExitCode() int {
	switch {
	case !p.Restarts || bugLeaveExitsZero:
		return 0
	case p.RelocateExitCode == 0:
		return DefaultRelocateExitCode
	}
	return p.RelocateExitCode
}

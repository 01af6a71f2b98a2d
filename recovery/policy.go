package recovery

import (
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/state"
)

// Restartable is implemented by work (a slicer, a simulator driver) that
// can be picked up by a new controller process without losing anything:
// its progress is checkpointed outside the process. It mirrors
// Teraslice's slicer().isRestartable(), later isRelocatable(). Work that
// does not implement it is not restartable: an older asset never asked to
// survive a move is not assumed to.
type Restartable interface {
	IsRestartable() bool
}

// restartable reports whether work says it can be restarted.
func restartable(work any) bool {
	r, ok := work.(Restartable)
	return ok && r.IsRestartable()
}

// Defaults for a zero [Policy].
const (
	DefaultRestartBudget    = 3
	DefaultRestartWindow    = 30 * time.Minute
	DefaultRelocateExitCode = 143 // 128 + SIGTERM: "terminated by signal", not success
	MaxRestartBudget        = 100
)

// DefaultDeadlines: a relocation nobody takes over within ten minutes
// fails the execution; a stop that takes more than five minutes is
// considered done (Teraslice's cluster master reaps stuck stopping
// executions after its shutdown timeout the same way).
func DefaultDeadlines() Deadlines {
	return Deadlines{
		state.Relocating: {After: 10 * time.Minute, Then: state.Failed},
		state.Stopping:   {After: 5 * time.Minute, Then: state.Stopped},
	}
}

// Deadline says that a status must not last longer than After, counted
// from when the record entered it ([storage.Record.Since]), and which
// terminal status to move it to then.
type Deadline struct {
	After time.Duration
	Then  state.Status
}

// Deadlines maps a status to its deadline. Statuses not in the map may
// last forever.
type Deadlines map[state.Status]Deadline

// ErrInvalidPolicy is matched by the error for a [Policy] or [Deadlines]
// that cannot be honoured; nothing is decided or written with it.
var ErrInvalidPolicy = errors.New("invalid recovery policy")

// Validate checks that every deadline is positive and leads somewhere the
// lifecycle allows.
func (d Deadlines) Validate() error {
	table := state.Lifecycle()
	for s, dl := range d {
		switch {
		case !s.Valid():
			return fmt.Errorf("recovery: %w: deadline for invalid %v", ErrInvalidPolicy, s)
		case dl.After <= 0:
			return fmt.Errorf("recovery: %w: deadline for %s is %v, want a positive duration", ErrInvalidPolicy, s, dl.After)
		case !table.Allowed(s, dl.Then):
			return fmt.Errorf("recovery: %w: deadline moves %s to %v, which the lifecycle does not allow", ErrInvalidPolicy, s, dl.Then)
		case !dl.Then.IsTerminal():
			// A deadline ends a status that must not last; moving it to
			// another live status would only start a new wait.
			return fmt.Errorf("recovery: %w: deadline moves %s to %s, want a terminal status", ErrInvalidPolicy, s, dl.Then)
		}
	}
	return nil
}

// Policy is what a controller knows about itself and its platform when it
// decides, on startup or on SIGTERM, what the stored status means.
type Policy struct {
	// Now is the time of the decision. Startup and Terminate are pure
	// functions, so the clock is an input; the Apply helpers fill it in
	// when it is zero.
	Now time.Time

	// Restarts: the platform restarts or replaces a controller that
	// exits (Teraslice: only the kubernetesV2 backend). Without it, a
	// controller that finds a running status on startup fails the
	// execution, and SIGTERM always means shut down.
	Restarts bool

	// Work is the execution's work; it is restartable if it implements
	// [Restartable] and says so.
	Work any

	// RestartBudget is how many unexpected restarts (a running status
	// found on startup without a relocation: an OOM kill, a lost node)
	// are resumed within RestartWindow; the next one fails the
	// execution. Zero means DefaultRestartBudget; at most
	// MaxRestartBudget. Restarts are counted in the record's metadata.
	RestartBudget int
	RestartWindow time.Duration

	// Deadlines for statuses that must not last; nil means
	// DefaultDeadlines. Startup honours them too, so a stale relocating
	// record is failed, not resumed.
	Deadlines Deadlines

	// RelocateExitCode is the exit status a relocating controller exits
	// with; zero means 143. It is never 0: on a Kubernetes Job, a pod
	// whose container exits 0 counts as the Job's success and is not
	// replaced, which would end a relocation with nothing running. See
	// [Action] for what each platform needs.
	RelocateExitCode int
}

func (p Policy) withDefaults() (Policy, error) {
	switch {
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
	if p.Deadlines == nil {
		p.Deadlines = DefaultDeadlines()
	}
	if err := p.Deadlines.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

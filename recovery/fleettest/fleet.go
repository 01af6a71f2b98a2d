package fleettest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
)

// Fleet is what an exploration runs: a table's roles, the policy its
// controllers decide with, what the cluster master does and whether a
// Reaper enforces the deadlines, and the invariants of the user's own to
// check besides the built-in ones.
type Fleet[S comparable] struct {
	// Roles are the table's roles; required.
	Roles *recovery.Roles[S]
	// Policy is what every controller decides with. Its Clock is
	// ignored: the explorer's clock gives each decision its time. The cluster
	// master records Policy.Work's restartability on the executions it
	// creates (recovery.MetaRelocatable), as a cluster master that
	// validated the job does.
	Policy recovery.Policy
	// Master is what the cluster master does.
	Master Master[S]
	// NoReaper leaves the fleet without a deadline Reaper: deadlines are
	// then honoured only by a controller that starts.
	NoReaper bool
	// Reaper configures the fleet's Reaper; its Clock and Actor are the
	// explorer's.
	Reaper recovery.ReaperOptions
	// Retire runs a Retirer (recovery.Retirer) beside the Reaper: once
	// an ended execution has been kept as long as the roles say
	// (recovery.RolesBuilder.Retain), it may be deleted, at any point
	// the explorer picks. Its controllers, live or out of reach, must
	// then leave it as it is: InvariantRetiredStaysGone.
	Retire bool
	// Invariants are checked at every state after the built-in ones.
	Invariants []Invariant
	// Ends are the ends a controller's work may earn besides the roles'
	// Ends (recovery.Decider.EndAs): each is a step of a working
	// controller. A table without Ends (Volcano's, Flink's) gives its
	// own here; with neither, work never finishes but by failing.
	Ends []S
}

// Master is what the cluster master of an explored fleet does, as an
// outside authority that never owns an execution.
type Master[S comparable] struct {
	// NoStop: the master never asks an execution to stop. By default it
	// asks each execution once, at any point, by writing the roles'
	// stopping state.
	NoStop bool
	// Moves are further moves the master writes whenever the execution
	// is in their From state (Teraslice's pause and resume), until it
	// asks the execution to stop: a stopped execution is not moved on
	// again (a redeploy after a stop would be a new request).
	Moves []Move[S]
	// Abandons: when an execution's platform gives up (its Job can make no
	// more pods), the master ends it with Decider.Abandon, as the kube
	// module's Jobs watch has a cluster master do.
	Abandons bool
	// Reruns is how many times, in all, the master reruns an ended
	// execution (recovery.Rerun, Teraslice's recover) into a new one
	// with its own controller pods.
	Reruns int
	// Requeued are the not-started states the master places again by
	// itself, so an execution left in one is not stranded (Teraslice
	// re-queues pending); nil means the table's initial state.
	Requeued []S
}

// Move is a move the cluster master writes as an outside authority.
type Move[S comparable] struct {
	Name     string // the action's name in paths and timelines ("pause")
	From, To S
}

// Invariant is a property of the fleet's records that must hold at every
// state an exploration reaches. Check returns nil when it holds, and
// otherwise an error saying what is wrong: the report prints it under the
// invariant's name with the interleaving that led there.
type Invariant struct {
	Name  string
	Check func(records []storage.Record) error
}

// The built-in invariants, by the name a Violation carries.
const (
	// InvariantOneOwnerWrites: a controller's write lands only while it
	// holds the execution's live ownership, so at most one controller
	// drives an execution, and every write of an old owner after a
	// take-over is fenced.
	InvariantOneOwnerWrites = "OneOwnerWrites"
	// InvariantNoCrashLoop: the executions resumed after unexpected
	// restarts never exceed the failovers the policy allows (within its
	// window).
	InvariantNoCrashLoop = "NoCrashLoop"
	// InvariantRestartsAreCrashes: a failover is counted only for a
	// controller that died unasked (killed, or cut off with its node): no
	// more are counted than happened.
	InvariantRestartsAreCrashes = "RestartsAreCrashes"
	// InvariantStopNeverLost: the master's stop of a running or
	// relocating execution is always written, and a stopped execution is
	// never resumed: from then on its status is the stopping state or an
	// end (terminal, or the roles' stopped, failed, completed or
	// terminated state).
	InvariantStopNeverLost = "StopNeverLost"
	// InvariantDrainRelocates: on a platform that restarts controllers,
	// a SIGTERM to the controller of restartable work in a running state
	// relocates it; the drain never ends the execution.
	InvariantDrainRelocates = "DrainRelocates"
	// InvariantNothingStranded: every execution has ended, or something
	// will move it on: a live controller that holds it or will start, a
	// replacement its platform can still make, a deadline the Reaper
	// enforces (an abandoned running execution included), the master
	// placing it again or abandoning it.
	InvariantNothingStranded = "NothingStranded"
	// InvariantJobEndsWithExecution: on a platform that restarts
	// controllers, a controller whose exit its platform counts exits 0
	// (a Kubernetes Job then completes and replaces nothing) only once
	// its execution has ended or is in a status the master places again;
	// a controller that leaves an execution still running or relocating
	// exits non-zero, so that another comes.
	InvariantJobEndsWithExecution = "JobEndsWithExecution"
	// InvariantAuditTrail: every write appends one audit entry naming its
	// writer, the status it left and the one it wrote, at the revision it
	// was made on and the time it was made, with a reason for every
	// change of status.
	InvariantAuditTrail = "AuditTrail"
	// InvariantExpectedErrors: the library's calls return only the errors
	// a controller is told to expect (a live holder, a refused start, a
	// move the table does not have), and never panic.
	InvariantExpectedErrors = "ExpectedErrors"
	// InvariantRetiredStaysGone: the Retirer deletes an execution only
	// when no controller holds it, and a retired execution is never
	// brought back: no controller, stale or new, writes it again.
	InvariantRetiredStaysGone = "RetiredStaysGone"
)

// Bound limits an exploration. Every field is a bound of its own: zero
// means none of it (no crashes, no drains), except Depth and Pods, which
// must be positive. DefaultBound is a bound that finishes quickly.
type Bound struct {
	// Depth is the number of steps from the start (one execution created,
	// no pod yet).
	Depth int
	// Pods is how many controller pods each execution's platform makes,
	// the first one included. A Job that has made them all makes no
	// more: the explorer's way of saying that a replacement may never
	// come.
	Pods int
	// Crashes is how many controllers die unasked in all: SIGKILLs (an
	// OOM kill) and nodes lost with their pod still alive.
	Crashes int
	// Drains is how many SIGTERMs the platform sends in all.
	Drains int
	// NoRaces: no write is raced. By default, at every write of a step
	// the explorer also tries each action of another actor landing
	// between the writer's read and its write (a store conflict).
	NoRaces bool
}

// DefaultBound is one execution, two pods, one crash, one drain and
// twelve steps, with races.
func DefaultBound() Bound {
	return Bound{Depth: 12, Pods: 2, Crashes: 1, Drains: 1}
}

// MaxDepth bounds Bound.Depth and a walk's depth.
const MaxDepth = 1000

// ErrInvalidFleet is matched by the error for a Fleet or a Bound no
// exploration can be run with.
var ErrInvalidFleet = errors.New("invalid fleet")

// ErrInvalidPath is matched by the error Replay returns for a path that
// is not a sequence of steps the fleet can take.
var ErrInvalidPath = errors.New("invalid path")

// Report says what an exploration covered.
type Report struct {
	// States is the number of distinct states reached (the start
	// included), and Steps the number of steps taken to reach them,
	// replays excluded.
	States, Steps int
	// Depth is the deepest level explored.
	Depth int
	// Exhausted: a level added no new state, so every state the fleet
	// can reach within the other bounds was checked, whatever the depth.
	Exhausted bool
	// Walks is the number of random walks taken (RandomWalks only).
	Walks int
}

// String says in a line what the exploration covered.
func (r Report) String() string {
	if r.Walks > 0 {
		return fmt.Sprintf("%d walks, %d steps, %d distinct states", r.Walks, r.Steps, r.States)
	}
	s := fmt.Sprintf("%d states, %d steps, depth %d", r.States, r.Steps, r.Depth)
	if r.Exhausted {
		s += " (every reachable state)"
	}
	return s
}

// Violation is the error of an exploration that found an invariant
// broken: which, what it found, and the shortest interleaving that breaks
// it (the shortest by steps; a walk's is shortened step by step) as a
// path Replay takes and as a timeline for people.
type Violation struct {
	Invariant string
	Problem   string
	// Path is the interleaving as steps ("pod-1 start", "platform sigterm
	// pod-1 [race@1: master stop ex-1]"); Replay takes it back.
	Path []string
	// Timeline is what happened at each step: who, when (from the
	// start), the writes with their statuses and reasons.
	Timeline []string
	// Seed is the walk's seed, for a violation RandomWalks found.
	Seed uint64
	// Report is what the exploration covered until it found this.
	Report Report
}

// ErrViolation is matched by every *Violation.
var ErrViolation = errors.New("invariant broken")

// Is makes errors.Is(err, ErrViolation) hold.
func (v *Violation) Is(target error) bool { return target == ErrViolation }

// Error prints the violation for a test's log: the invariant and what
// broke it, the timeline, the path as Go strings to paste into Replay.
func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleettest: %s broken after %d steps: %s\n", v.Invariant, len(v.Path), v.Problem)
	b.WriteString("timeline:\n")
	for _, line := range v.Timeline {
		b.WriteString("  ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteString("path:\n")
	for _, step := range v.Path {
		fmt.Fprintf(&b, "  %q,\n", step)
	}
	if v.Seed != 0 {
		fmt.Fprintf(&b, "seed: %d\n", v.Seed)
	}
	if v.Report != (Report{}) {
		fmt.Fprintf(&b, "explored: %s", v.Report)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// validate checks f and b, returning the fleet's settings.
func (f Fleet[S]) validate(b Bound) (*settings[S], error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("fleettest: %w: %s", ErrInvalidFleet, fmt.Sprintf(format, args...))
	}
	switch {
	case f.Roles == nil:
		return nil, bad("nil Roles")
	case b.Depth <= 0 || b.Depth > MaxDepth:
		return nil, bad("Depth %d, want 1 to %d", b.Depth, MaxDepth)
	case b.Pods <= 0:
		return nil, bad("Pods %d, want at least 1", b.Pods)
	case b.Crashes < 0 || b.Drains < 0:
		return nil, bad("negative Crashes or Drains")
	case f.Master.Reruns < 0:
		return nil, bad("negative Master.Reruns")
	}
	if _, err := recovery.NewDecider(f.Roles, f.Policy); err != nil {
		return nil, bad("%v", err)
	}
	table := f.Roles.Table()
	for _, m := range f.Master.Moves {
		if m.Name == "" || strings.ContainsAny(m.Name, " []") {
			return nil, bad("master move %q: want a name without spaces or brackets", m.Name)
		}
		if !table.Allowed(m.From, m.To) {
			return nil, bad("master move %s: the table does not allow it", m.Name)
		}
	}
	for _, end := range f.Ends {
		if !table.Has(end) {
			return nil, bad("end %v is not a state of the table", end)
		}
	}
	for _, inv := range f.Invariants {
		if inv.Name == "" || inv.Check == nil {
			return nil, bad("an invariant without a name or a Check")
		}
	}
	if f.Retire && !retains(f.Roles) {
		return nil, bad("Retire, but the roles keep every execution for ever: give them a Retain")
	}
	s := &settings[S]{fleet: f, bound: b, table: table}
	var ok bool
	if s.running, ok = f.Roles.FirstRunning(); !ok {
		return nil, bad("no running state reachable from the initial one")
	}
	requeued := f.Master.Requeued
	if requeued == nil {
		requeued = []S{table.Initial()}
	}
	s.requeued = map[S]bool{}
	for _, r := range requeued {
		s.requeued[r] = true
	}
	if f.Reaper.Abandoned < 0 {
		return nil, bad("negative Reaper.Abandoned")
	}
	s.restartable = f.Policy.Work != nil && f.Policy.Work.IsRestartable()
	s.failovers = f.Policy.Failovers
	s.abandoned = f.Reaper.Abandoned
	return s, nil
}

// retains reports whether the roles retire any ended execution.
func retains[S comparable](roles *recovery.Roles[S]) bool {
	for _, s := range roles.Table().States() {
		if _, ok := roles.Retention(s); ok {
			return true
		}
	}
	return false
}

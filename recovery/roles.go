package recovery

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/execfsm/execfsm/internal/metaname"
	"github.com/execfsm/execfsm/transition"
)

// Role is what a state means to the decisions.
type Role uint8

// The roles. Every state of a table has exactly one.
const (
	// RoleNotStarted: nothing runs (yet, or any more without the
	// execution being over: a simulator idle after a stop, or in error
	// waiting for a reset). Startup starts; SIGTERM shuts down.
	RoleNotStarted Role = iota + 1
	// RoleRunning: work runs. Found on startup it means the previous
	// controller died unasked (an unexpected restart); on SIGTERM a
	// restartable controller relocates.
	RoleRunning
	// RoleRelocating: a return state a relocating controller writes; it
	// remembers the running state it left, and the controller that
	// takes over returns there. A table may have several, each
	// returning to its own running states.
	RoleRelocating
	// RoleStopping: a drain: a stop was asked for (or a restart, an
	// abort), and the drain ends in the state its roles name. Startup
	// continues the drain; SIGTERM shuts down. A table may have several
	// (Volcano's Aborting, Terminating and Completing, each with its
	// end).
	RoleStopping
	// RoleTerminal: the execution is over (the table's terminal states).
	// Startup refuses it.
	RoleTerminal
	// RoleParked: nothing runs and nothing should until an outside
	// authority moves the execution on (a suspended job waiting for a
	// user's resume: Volcano's Aborted). Startup starts nothing
	// (DecisionWait), SIGTERM shuts down, and no deadline ends it unless
	// the roles give one.
	RoleParked
	// RoleFinishing: the work is over and its end not yet written (a
	// succeeding or failing step before completed or failed). Startup
	// writes the end the roles name for it, never runs the work again;
	// End writes it too.
	RoleFinishing
)

func (r Role) String() string {
	switch r {
	case RoleNotStarted:
		return "not started"
	case RoleRunning:
		return "running"
	case RoleRelocating:
		return "relocating"
	case RoleStopping:
		return "stopping"
	case RoleTerminal:
		return "terminal"
	case RoleParked:
		return "parked"
	case RoleFinishing:
		return "finishing"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ErrInvalidRoles is matched by the error [RolesBuilder.Build] returns for
// roles that do not fit their table.
var ErrInvalidRoles = errors.New("invalid roles")

// Roles say what each state of a table means to the decisions ([Startup],
// [Terminate], [End], [Roles.Due], [Reaper]), so that they work for
// any table: Teraslice's execution lifecycle (package teraslice has its
// roles) as much as a simulator's idle, starting, running, paused,
// stopping and error, or a batch scheduler's several drains. Build them
// with [DefineRoles]; they are checked against the table then, never
// later. A Roles is immutable and safe to share.
type Roles[S comparable] struct {
	table *transition.Table[S]
	role  map[S]Role
	// relocations map each relocating state to where a relocation that
	// does not say what it left goes; relocatingFor maps each running
	// state to the relocating state that returns to it.
	relocations  map[S]S
	relocatingOf map[S]S
	relocating   []S // in the order given
	stops        map[S]S
	stopping     []S // in the order given: the first is what an outside stop writes
	finishing    map[S]S
	failed       S // what a failure writes
	completed    S // what work that finished well writes
	terminated   S // what work shut down before it finished writes
	hasEnds      bool
	timers       map[S][]Timer[S] // by state, in the order given
	timerOrder   []Timer[S]
	budgets      map[string]Budget[S] // by counter
	budgetOrder  []string
	spentIn      map[S][]string      // the budgets' counters whose moves enter a state
	retain       map[S]time.Duration // how long an ended execution is kept, by terminal state
}

// RolesBuilder collects the roles of a table's states; see [DefineRoles].
type RolesBuilder[S comparable] struct {
	table       *transition.Table[S]
	lifecycle   *transition.Builder[S] // DefineLifecycle's: the table Build builds
	given       []roleGiven[S]
	twice       []string
	r           Roles[S]
	hasFail     bool
	running     []S
	relocations []pair[S]
	stops       []pair[S]
	finishing   []pair[S]
	timers      []Timer[S]
	budgets     []Budget[S]
	retains     []retention[S]
}

type roleGiven[S comparable] struct {
	state S
	role  Role
}

// pair is a state and the state it leads to: a relocation and its
// restart, a drain and its end, a finishing state and its end.
type pair[S comparable] struct{ state, to S }

// DefineRoles starts the roles of table's states (see the example). The
// table's terminal states have [RoleTerminal]; every other state must
// be given exactly one role.
func DefineRoles[S comparable](table *transition.Table[S]) *RolesBuilder[S] {
	return &RolesBuilder[S]{table: table}
}

// DefineLifecycle starts the roles of the table table will build, and
// lets them write the moves they need: Build adds to table every move
// and end below that it does not declare yet, builds it, then checks
// the roles against it as [DefineRoles] does. What is left to write by
// hand is what only your lifecycle knows: the moves between running
// states (a pause and its resume), guards, counters, parked states'
// ways out.
//
//   - a not-started state (one that is not also an end) moves to the first
//     running state given, the first drain, Failed and Ends' terminated;
//   - a running state moves to Failed, to both Ends, to the first drain,
//     and to the relocating state that returns to it;
//   - a relocating state returns to the running states (all those no
//     other relocating state returns to, unless table declares its own
//     Return edges from it), and moves to its fallback, Failed and the
//     first drain;
//   - a drain moves to its end, to Ends' completed (the work may finish
//     first) and to Failed; a finishing state to its end and to Failed;
//   - Failed, both Ends, and every drain's and finishing state's end are
//     terminal unless given a role (not started, parked).
func DefineLifecycle[S comparable](table *transition.Builder[S]) *RolesBuilder[S] {
	return &RolesBuilder[S]{lifecycle: table}
}

// complete adds to b.lifecycle the moves and ends the roles need (see
// DefineLifecycle).
func (b *RolesBuilder[S]) complete() {
	ends := b.ends()
	for _, g := range b.given {
		if g.role == RoleNotStarted && !slices.Contains(ends, g.state) {
			if len(b.running) > 0 {
				b.need(g.state, b.running[0])
			}
			b.toEnds(g.state, true, false, true, true)
		}
	}
	for _, r := range b.running {
		b.toEnds(r, true, true, true, true)
	}
	b.completeRelocations()
	for _, p := range b.stops {
		b.need(p.state, p.to)
		b.toEnds(p.state, true, true, false, false)
	}
	for _, p := range b.finishing {
		b.need(p.state, p.to)
		b.toEnds(p.state, true, false, false, false)
	}
	given := map[S]bool{}
	for _, g := range b.given {
		given[g.state] = true
	}
	for _, end := range ends {
		if !given[end] {
			b.lifecycle.Terminal(end)
		}
	}
}

// ends are the states the roles end an execution in: Failed, both Ends,
// every drain's and finishing state's end.
func (b *RolesBuilder[S]) ends() []S {
	var ends []S
	if b.hasFail {
		ends = append(ends, b.r.failed)
	}
	if b.r.hasEnds {
		ends = append(ends, b.r.completed, b.r.terminated)
	}
	for _, p := range append(slices.Clone(b.stops), b.finishing...) {
		ends = append(ends, p.to)
	}
	return ends
}

// need adds the move from → to to the lifecycle unless it declares it.
func (b *RolesBuilder[S]) need(from, to S) {
	if declared, _ := b.lifecycle.Declared(from, to); from != to && !declared {
		b.lifecycle.Allow(from, to)
	}
}

// toEnds adds the moves from a live state toward the ends it may take.
func (b *RolesBuilder[S]) toEnds(from S, failed, completed, terminated, drain bool) {
	if failed && b.hasFail {
		b.need(from, b.r.failed)
	}
	if completed && b.r.hasEnds {
		b.need(from, b.r.completed)
	}
	if terminated && b.r.hasEnds {
		b.need(from, b.r.terminated)
	}
	if drain && len(b.stops) > 0 {
		b.need(from, b.stops[0].state)
	}
}

// completeRelocations gives each relocating state its return edges (the
// running states no other one returns to, unless the lifecycle declares
// its own), the moves into it, and its ways out.
func (b *RolesBuilder[S]) completeRelocations() {
	returnsOf := func(relocating S) []S {
		var returns []S
		for _, r := range b.running {
			if _, isReturn := b.lifecycle.Declared(relocating, r); isReturn {
				returns = append(returns, r)
			}
		}
		return returns
	}
	returnedTo := map[S]bool{}
	for _, p := range b.relocations {
		for _, r := range returnsOf(p.state) {
			returnedTo[r] = true
		}
	}
	for _, p := range b.relocations {
		returns := returnsOf(p.state)
		if len(returns) == 0 {
			for _, r := range b.running {
				if !returnedTo[r] {
					b.lifecycle.Return(p.state, r)
					returns, returnedTo[r] = append(returns, r), true
				}
			}
		}
		for _, r := range returns {
			b.need(r, p.state)
		}
		b.need(p.state, p.to)
		b.toEnds(p.state, true, false, false, true)
	}
}

func (b *RolesBuilder[S]) give(role Role, states ...S) {
	for _, s := range states {
		b.given = append(b.given, roleGiven[S]{s, role})
	}
}

func (b *RolesBuilder[S]) once(what string, done bool) bool {
	if done {
		b.twice = append(b.twice, what+" is given twice")
		return false
	}
	return true
}

// NotStarted gives states [RoleNotStarted].
func (b *RolesBuilder[S]) NotStarted(states ...S) *RolesBuilder[S] {
	b.give(RoleNotStarted, states...)
	return b
}

// Running gives states [RoleRunning]. At least one state must be running.
func (b *RolesBuilder[S]) Running(states ...S) *RolesBuilder[S] {
	b.give(RoleRunning, states...)
	b.running = append(b.running, states...)
	return b
}

// Parked gives states [RoleParked]: not running, not over, waiting for an
// outside authority to move them on (a suspended job's resume).
func (b *RolesBuilder[S]) Parked(states ...S) *RolesBuilder[S] {
	b.give(RoleParked, states...)
	return b
}

// Relocating gives relocating [RoleRelocating]: a return state (see
// [transition.Builder.Return]) running states move to and come back from.
// A relocated record that does not say which state it left (no memory of
// it: created there, or moved there by a tool) starts again in fallback,
// a not-started state relocating can move to; it is not where a crash
// restart goes. A table may have
// several relocating states, each returning to its own running states;
// every running state that can move to one must be returned to by it,
// and no running state by two. A table without a relocating state leaves
// this out; its controllers then shut down on every SIGTERM.
func (b *RolesBuilder[S]) Relocating(relocating, fallback S) *RolesBuilder[S] {
	b.give(RoleRelocating, relocating)
	b.relocations = append(b.relocations, pair[S]{relocating, fallback})
	return b
}

// Stopping gives stopping [RoleStopping]: a drain, and end, what a
// controller writes when the drain is over (or a deadline when it takes
// too long): a terminal, not-started or parked state stopping can move
// to. A table may have several drains, each with its end; the first given
// is the stop an outside authority asks for (an operator's stop, the
// admin handler's). A table without a stopping state leaves this out.
func (b *RolesBuilder[S]) Stopping(stopping, end S) *RolesBuilder[S] {
	b.give(RoleStopping, stopping)
	b.stops = append(b.stops, pair[S]{stopping, end})
	return b
}

// Finishing gives finishing [RoleFinishing]: the work is over and end,
// what is written next, not yet written: a terminal, not-started or
// parked state finishing can move to. A restarted controller writes end
// and never runs the work again.
func (b *RolesBuilder[S]) Finishing(finishing, end S) *RolesBuilder[S] {
	b.give(RoleFinishing, finishing)
	b.finishing = append(b.finishing, pair[S]{finishing, end})
	return b
}

// Ends names what the end of the work writes ([End]): completed when
// it ran to its end without failures, terminated when the controller was
// shut down before it did. Both must be terminal or not-started states
// every running state can move to, and completed one every stopping state
// can move to too (the work may finish before a stop does). A table
// whose controllers never finish work (a simulator runs until stopped)
// leaves this out; End then refuses with [ErrInvalidRoles].
func (b *RolesBuilder[S]) Ends(completed, terminated S) *RolesBuilder[S] {
	if b.once("Ends", b.r.hasEnds) {
		b.r.completed, b.r.terminated, b.r.hasEnds = completed, terminated, true
	}
	return b
}

// Timer gives the roles timers (see [Timer]); a state may have several,
// and the first to fall due moves it. They are checked with the roles
// when they are built.
func (b *RolesBuilder[S]) Timer(timers ...Timer[S]) *RolesBuilder[S] {
	b.timers = append(b.timers, timers...)
	return b
}

// Deadline gives state s a deadline: after it has lasted after, it moves
// to then. It is the most common [Timer]:
// Timer{State: s, After: after, Then: then}. A status nobody retries when
// its owner dies belongs here (Teraslice re-queues only pending
// executions after a cluster master restart: scheduling and
// initializing would be stranded forever).
func (b *RolesBuilder[S]) Deadline(s S, after time.Duration, then S) *RolesBuilder[S] {
	return b.Timer(Timer[S]{State: s, After: after, Then: then})
}

// Budget gives the roles a budget for one of the table's counters (see
// [Budget]); a counter has at most one.
func (b *RolesBuilder[S]) Budget(budget Budget[S]) *RolesBuilder[S] {
	b.budgets = append(b.budgets, budget)
	return b
}

// Failed names the state a failure writes (an unexpected restart past
// the budget, a relocation nobody took over): a terminal, not-started or
// parked state every running state can move to (parked: a failed job
// that waits for its spec to change, as a Flink deployment does).
// Required.
func (b *RolesBuilder[S]) Failed(failed S) *RolesBuilder[S] {
	if b.once("Failed", b.hasFail) {
		b.r.failed, b.hasFail = failed, true
	}
	return b
}

// Build checks the roles against the table and returns them, or an error
// matching [ErrInvalidRoles] that lists every problem. After
// [DefineLifecycle] it first completes and builds the table (an error of
// the table matches [transition.ErrInvalidTable] too); [Roles.Table]
// returns it.
func (b *RolesBuilder[S]) Build() (*Roles[S], error) {
	if b.lifecycle != nil && b.table == nil {
		b.complete()
		table, err := b.lifecycle.Build()
		if err != nil {
			return nil, fmt.Errorf("recovery: %w: the lifecycle's table: %w", ErrInvalidRoles, err)
		}
		b.table = table
	}
	if b.table == nil {
		return nil, fmt.Errorf("recovery: %w: nil table", ErrInvalidRoles)
	}
	c := &rolesCheck[S]{b: b, t: b.table, r: b.r, problems: slices.Clone(b.twice)}
	c.r.table = c.t
	c.assign()
	c.failed()
	c.relocations()
	c.paths("Stopping", b.stops, &c.r.stops, &c.r.stopping)
	c.paths("Finishing", b.finishing, &c.r.finishing, nil)
	c.ends()
	c.budgets()
	c.timers()
	c.retention()
	if len(c.problems) > 0 {
		return nil, fmt.Errorf("recovery: %w:\n  %s", ErrInvalidRoles, strings.Join(c.problems, "\n  "))
	}
	return &c.r, nil
}

// rolesCheck is Build's work: the roles being built, checked against the
// table one rule at a time, every problem found kept to be reported
// together.
type rolesCheck[S comparable] struct {
	b        *RolesBuilder[S]
	t        *transition.Table[S]
	r        Roles[S]
	problems []string
}

func (c *rolesCheck[S]) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *rolesCheck[S]) name(s S) string { n, _ := c.t.Name(s); return fmt.Sprintf("%q", n) }

// allow is the fix for a move the roles need and the table lacks.
func (c *rolesCheck[S]) allow(from, to S) string {
	return fmt.Sprintf("add Allow(%s, %s) to the table", c.name(from), c.name(to))
}

// ending says whether s may end an execution, or a drain: a terminal, a
// not-started or a parked state.
func (c *rolesCheck[S]) ending(s S) bool {
	role := c.r.role[s]
	return role == RoleTerminal || role == RoleNotStarted || role == RoleParked
}

// assign gives every state its role: terminal ones from the table, the
// rest as given, each exactly once; and some state must be running.
func (c *rolesCheck[S]) assign() {
	c.r.role = map[S]Role{}
	for _, s := range c.t.States() {
		if c.t.IsTerminal(s) {
			c.r.role[s] = RoleTerminal
		}
	}
	for _, g := range c.b.given {
		switch prev, ok := c.r.role[g.state]; {
		case !c.t.Has(g.state):
			c.add("%s (%s) is not a state of the table", c.name(g.state), g.role)
		case ok && prev == RoleTerminal:
			c.add("%s is terminal in the table; it cannot be %s", c.name(g.state), g.role)
		case ok && prev != g.role:
			c.add("%s is given two roles: %s and %s", c.name(g.state), prev, g.role)
		case ok:
			c.add("%s is given the %s role twice", c.name(g.state), g.role)
		default:
			c.r.role[g.state] = g.role
		}
	}
	for _, s := range c.t.States() {
		if _, ok := c.r.role[s]; !ok {
			c.add("%s has no role: give it one (NotStarted, Running, Parked, Relocating, Stopping, Finishing; Failed or Ends for an end), or make it Terminal in the table", c.name(s))
		}
	}
	if len(c.b.running) == 0 {
		c.add("no state is running: name the states the work runs in with Running")
	}
}

// failed checks that there is a Failed state, that it ends an
// execution, and that every running state can fail.
func (c *rolesCheck[S]) failed() {
	switch r := &c.r; {
	case !c.b.hasFail:
		c.add("no Failed state: name the state a failure writes with Failed")
	case !c.t.Has(r.failed) || !c.ending(r.failed):
		c.add("Failed %s must be a terminal, not-started or parked state of the table", c.name(r.failed))
	default:
		c.eachRunning(func(s S) {
			if !c.t.Allowed(s, r.failed) {
				c.add("running %s cannot move to Failed %s: %s", c.name(s), c.name(r.failed), c.allow(s, r.failed))
			}
		})
	}
}

// relocations checks that every running state that can be relocated is
// returned to by exactly one relocating state, that a relocation
// without a previous state can restart, and that a relocation can fail
// at its deadline.
func (c *rolesCheck[S]) relocations() {
	r := &c.r
	r.relocations, r.relocatingOf = map[S]S{}, map[S]S{}
	for _, p := range c.b.relocations {
		if !c.t.Has(p.state) || r.role[p.state] != RoleRelocating {
			continue // assign said why
		}
		if _, twice := r.relocations[p.state]; twice {
			continue
		}
		r.relocations[p.state] = p.to
		r.relocating = append(r.relocating, p.state)
		returns := 0
		c.eachRunning(func(s S) {
			if !c.t.IsReturn(p.state, s) {
				return
			}
			returns++
			if other, ok := r.relocatingOf[s]; ok {
				c.add("running %s is returned to by two relocating states, %s and %s", c.name(s), c.name(other), c.name(p.state))
				return
			}
			r.relocatingOf[s] = p.state
		})
		if returns == 0 {
			c.add("Relocating %s has no return edge back to a running state: add Return(%s, the running states it resumes) to the table", c.name(p.state), c.name(p.state))
		}
		switch {
		case !c.t.Has(p.to) || r.role[p.to] != RoleNotStarted:
			c.add("a relocation's fallback %s must be a not-started state Relocating %s can move to", c.name(p.to), c.name(p.state))
		case !c.t.Allowed(p.state, p.to):
			c.add("Relocating %s cannot move to its fallback %s: %s", c.name(p.state), c.name(p.to), c.allow(p.state, p.to))
		}
		if c.b.hasFail && c.t.Has(r.failed) && !c.t.Allowed(p.state, r.failed) {
			c.add("Relocating %s cannot move to Failed %s (its deadline could not be enforced): %s", c.name(p.state), c.name(r.failed), c.allow(p.state, r.failed))
		}
	}
	c.eachRunning(func(s S) {
		for _, rel := range r.relocating {
			if c.t.Allowed(s, rel) && !c.t.IsReturn(rel, s) {
				c.add("running %s can move to Relocating %s, which has no return edge back to it: add Return(%s, %s) to the table", c.name(s), c.name(rel), c.name(rel), c.name(s))
			}
		}
	})
}

// paths checks drains or finishing states: each must lead to its end, a
// terminal, not-started or parked state it can move to; into and order
// receive them.
func (c *rolesCheck[S]) paths(what string, given []pair[S], into *map[S]S, order *[]S) {
	*into = map[S]S{}
	for _, p := range given {
		if !c.t.Has(p.state) {
			continue // assign said why
		}
		if _, twice := (*into)[p.state]; twice {
			continue
		}
		(*into)[p.state] = p.to
		if order != nil {
			*order = append(*order, p.state)
		}
		switch {
		case !c.t.Has(p.to) || !c.ending(p.to):
			c.add("%s's end %s must be a terminal, not-started or parked state %s %s can move to", what, c.name(p.to), what, c.name(p.state))
		case !c.t.Allowed(p.state, p.to):
			c.add("%s %s cannot move to its end %s: %s", what, c.name(p.state), c.name(p.to), c.allow(p.state, p.to))
		}
	}
}

// ends checks that work that finishes, or is shut down, can be written
// from every running state, and that work finishing before its stop can
// be written from every stopping state.
func (c *rolesCheck[S]) ends() {
	r := &c.r
	if !r.hasEnds {
		return
	}
	for _, end := range []struct {
		what string
		s    S
	}{{"Ends' completed", r.completed}, {"Ends' terminated", r.terminated}} {
		if !c.t.Has(end.s) || !c.ending(end.s) {
			c.add("%s %s must be a terminal, not-started or parked state of the table", end.what, c.name(end.s))
			continue
		}
		c.eachRunning(func(s S) {
			if !c.t.Allowed(s, end.s) {
				c.add("running %s cannot move to %s %s: %s", c.name(s), end.what, c.name(end.s), c.allow(s, end.s))
			}
		})
	}
	if !c.t.Has(r.completed) {
		return
	}
	for _, s := range r.stopping {
		if !c.t.Allowed(s, r.completed) && r.stops[s] != r.completed {
			c.add("Stopping %s cannot move to Ends' completed %s (work that finishes before its stop): %s", c.name(s), c.name(r.completed), c.allow(s, r.completed))
		}
	}
}

// eachRunning calls fn with every running state given that is a state
// of the table (one that is not is reported by assign).
func (c *rolesCheck[S]) eachRunning(fn func(S)) {
	for _, s := range c.b.running {
		if c.t.Has(s) {
			fn(s)
		}
	}
}

// Table returns the table the roles were checked against.
func (r *Roles[S]) Table() *transition.Table[S] { return r.table }

// Role returns the role of s, and false if s is not a state of the table.
func (r *Roles[S]) Role(s S) (Role, bool) {
	role, ok := r.role[s]
	return role, ok
}

// Failed returns the state a failure writes.
func (r *Roles[S]) Failed() S { return r.failed }

// Relocating returns the relocating state (the first given, when there
// are several), and false if the table has none.
func (r *Roles[S]) Relocating() (S, bool) {
	if len(r.relocating) == 0 {
		var zero S
		return zero, false
	}
	return r.relocating[0], true
}

// RelocatingFor returns the relocating state that returns to running
// state s, and false if none does (s cannot be relocated).
func (r *Roles[S]) RelocatingFor(s S) (S, bool) {
	rel, ok := r.relocatingOf[s]
	return rel, ok
}

// Stopping returns the stop an outside authority asks for (the first
// drain given) and what it ends in, and false if the table has no
// stopping state.
func (r *Roles[S]) Stopping() (stopping, end S, ok bool) {
	if len(r.stopping) == 0 {
		return stopping, end, false
	}
	return r.stopping[0], r.stops[r.stopping[0]], true
}

// End returns what a stopping or finishing state leads to (its drain's
// end, the end its finished work writes), or a relocating state's
// restart, and false for a state of another role.
func (r *Roles[S]) End(s S) (S, bool) {
	if end, ok := r.stops[s]; ok {
		return end, true
	}
	if end, ok := r.finishing[s]; ok {
		return end, true
	}
	end, ok := r.relocations[s]
	return end, ok
}

// Ends returns what work that finished well writes and what work shut
// down before it finished writes, and false if the roles have no Ends.
func (r *Roles[S]) Ends() (completed, terminated S, ok bool) {
	return r.completed, r.terminated, r.hasEnds
}

// FirstRunning returns the running state a controller that starts an
// execution walks it to: the first running state (in the table's order)
// reachable from the initial one; false if none is.
func (r *Roles[S]) FirstRunning() (S, bool) {
	t := r.table
	for _, s := range t.States() {
		if r.role[s] == RoleRunning && t.Path(t.Initial(), s) != nil {
			return s, true
		}
	}
	var zero S
	return zero, false
}

// Timers returns the timers the roles give ([RolesBuilder.Timer],
// [RolesBuilder.Deadline]) in the order given: none is implied
// (teraslice.Roles spells out Teraslice's). The slice is the caller's.
func (r *Roles[S]) Timers() []Timer[S] { return slices.Clone(r.timerOrder) }

// TimersOf returns the timers of state s, in the order given.
func (r *Roles[S]) TimersOf(s S) []Timer[S] { return slices.Clone(r.timers[s]) }

// Budgets returns the budgets the roles give ([RolesBuilder.Budget]) in
// the order given. The slice is the caller's.
func (r *Roles[S]) Budgets() []Budget[S] {
	out := make([]Budget[S], len(r.budgetOrder))
	for k, counter := range r.budgetOrder {
		out[k] = r.budgets[counter]
	}
	return out
}

// over reports whether an execution in s needs no controller: it has
// ended, or is parked until an outside authority moves it on.
func (r *Roles[S]) over(s S) bool {
	role := r.role[s]
	return role == RoleTerminal || role == RoleParked
}

// stopEnd reports whether s is what a finished drain writes.
func (r *Roles[S]) stopEnd(s S) bool {
	for _, end := range r.stops {
		if end == s {
			return true
		}
	}
	return false
}

// fits reports whether table has the very states the roles were given
// for, so decisions made with the roles can be written through it (a
// table built from the same builder with guards added fits).
func (r *Roles[S]) fits(table *transition.Table[S]) error {
	if table == r.table {
		return nil
	}
	if table.Len() == r.table.Len() {
		same := true
		for _, s := range table.States() {
			if role, ok := r.role[s]; !ok || (role == RoleTerminal) != table.IsTerminal(s) {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	return fmt.Errorf("recovery: %w: the execution's table has other states than the roles' table", ErrInvalidRoles)
}

// budgets checks each budget: a counter of the table, given once, a
// valid allowance and backoff, and an end every state its counted moves
// enter can move to.
func (c *rolesCheck[S]) budgets() {
	r := &c.r
	r.budgets, r.spentIn = map[string]Budget[S]{}, map[S][]string{}
	for _, b := range c.b.budgets {
		if _, twice := r.budgets[b.Counter]; twice {
			c.add("the budget for counter %q is given twice", b.Counter)
			continue
		}
		if !c.t.HasCounter(b.Counter) {
			c.add("budget for counter %q, which no move of the table counts (transition.Builder.Count)", b.Counter)
			continue
		}
		r.budgets[b.Counter] = b
		r.budgetOrder = append(r.budgetOrder, b.Counter)
		if err := b.Allowance.check("budget " + b.Counter + " Allowance"); err != nil {
			c.add("%s", strings.TrimPrefix(err.Error(), "recovery: "+ErrInvalidPolicy.Error()+": "))
		}
		if problem := b.Backoff.check(); problem != "" {
			c.add("budget %s: %s", b.Counter, problem)
		}
		if !c.t.Has(b.Exhausted) || !c.ending(b.Exhausted) {
			c.add("budget %s: Exhausted %s must be a terminal, not-started or parked state of the table", b.Counter, c.name(b.Exhausted))
			continue
		}
		for _, s := range c.spentInto(b.Counter) {
			r.spentIn[s] = append(r.spentIn[s], b.Counter)
			if s != b.Exhausted && r.role[s] != RoleTerminal && !c.t.Allowed(s, b.Exhausted) {
				c.add("budget %s: %s, which its counted moves enter, cannot move to Exhausted %s: %s", b.Counter, c.name(s), c.name(b.Exhausted), c.allow(s, b.Exhausted))
			}
		}
	}
}

// spentInto returns the states counter's moves enter, in the table's
// order, but terminal ones (nothing moves on from them).
func (c *rolesCheck[S]) spentInto(counter string) []S {
	var into []S
	for _, to := range c.t.States() {
		if c.t.IsTerminal(to) {
			continue
		}
		for _, from := range c.t.States() {
			if slices.Contains(c.t.Counters(from, to), counter) {
				into = append(into, to)
				break
			}
		}
	}
	return into
}

// timers checks each timer: a live state of the table, a duration or a
// budget to wait for, counters and budgets the roles have, and a move the
// table allows to a state a timer may write.
func (c *rolesCheck[S]) timers() {
	r := &c.r
	r.timers = map[S][]Timer[S]{}
	for _, t := range c.b.timers {
		role, known := r.role[t.State]
		then, thenKnown := r.role[t.Then]
		switch {
		case !known:
			c.add("timer for %s, not a state of the table", c.name(t.State))
			continue
		case role == RoleTerminal:
			c.add("timer for terminal %s, which lasts by definition", c.name(t.State))
			continue
		case t.After < 0:
			c.add("timer for %s is %v, want a positive duration", c.name(t.State), t.After)
		case t.After == 0 && t.Budget == "" && t.Name == "":
			c.add("timer for %s is %v, want a positive duration (or a Budget's backoff, or a Name for the execution's own)", c.name(t.State), t.After)
		}
		switch {
		case !thenKnown:
			c.add("timer moves %s to %s, which the table does not allow", c.name(t.State), c.name(t.Then))
		case !c.t.Allowed(t.State, t.Then):
			c.add("timer moves %s to %s, which the table does not allow: %s", c.name(t.State), c.name(t.Then), c.allow(t.State, t.Then))
		case then == RoleRelocating || then == RoleFinishing:
			c.add("timer moves %s to %s, a %s state: a controller enters it with the work in hand, never a timer", c.name(t.State), c.name(t.Then), then)
		}
		if t.Since != "" && !c.t.HasCounter(t.Since) {
			c.add("timer for %s measures since counter %q, which no move of the table counts", c.name(t.State), t.Since)
		}
		if _, ok := r.budgets[t.Budget]; t.Budget != "" && !ok {
			c.add("timer for %s waits for budget %q, which the roles do not give", c.name(t.State), t.Budget)
		}
		if t.Name != "" {
			if err := metaname.Check("timer", t.Name); err != nil {
				c.add("timer for %s: %v", c.name(t.State), err)
			}
		}
		r.timers[t.State] = append(r.timers[t.State], t)
		r.timerOrder = append(r.timerOrder, t)
	}
}

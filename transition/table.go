package transition

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/execfsm/execfsm/internal/unknown"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// MaxStates is the most states a table may have. It keeps a state's index
// in one byte, so a [Machine] packs its current state, the state it came
// from and a change counter into one word it can swap atomically.
const MaxStates = 255

// MaxNameLen bounds the text form of a state, which every record stores.
const MaxNameLen = storage.MaxStatusLen

// ErrInvalidTable is matched by every error [Builder.Build] returns.
var ErrInvalidTable = errors.New("invalid transition table")

// BuildError lists every problem [Builder.Build] found, so a table with
// three mistakes is fixed in one round, not three.
type BuildError struct {
	Problems []string
}

func (e *BuildError) Error() string {
	return "transition: invalid table: " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalidTable) hold.
func (e *BuildError) Is(target error) bool { return target == ErrInvalidTable }

// Edge flags, one byte per (from, to) pair.
const (
	edgeAllowed uint8 = 1 << iota // from → to is in the table
	edgeReturn                    // ... but only back to the state from was entered from
	edgeGuarded                   // ... and guards of this edge must agree
)

// Table is a validated, immutable transition table over states of type S:
// which states exist, which is initial, which are terminal, which moves
// are allowed and which guards must agree to a move. Build one with [New].
//
// A Table is safe for concurrent use. Its text form of a state is the
// state's String method if it has one, otherwise fmt.Sprint; decoding
// (see [Table.Parse]) looks the text up among the table's own states, so a
// record never decodes into a state the table does not know.
type Table[S comparable] struct {
	states   []S
	names    []string
	byName   map[string]uint8
	index    map[S]uint8
	dense    denseIndex
	initial  uint8
	terminal []bool
	edges    []uint8 // n×n flags, from-major
	n        int
	guards   map[int][]Guard[S] // by edge from*n+to
	anyGuard []Guard[S]
	guarded  bool             // any guard at all: Fire then takes its slower path
	counters map[int][]string // by edge from*n+to: the counters a move adds to
	aliases  map[string]uint8 // other names Parse reads a state from
}

// Builder collects the pieces of a [Table]. Its methods record what they
// are given and never fail; [Builder.Build] checks everything at once.
// A Builder is not safe for concurrent use.
type Builder[S comparable] struct {
	initial  S
	declared []S // from States, nil when the state set is open
	closed   bool
	seen     []S // every state named, in first-mention order
	seenSet  map[S]bool
	edges    []edgeDecl[S]
	terminal []S
	guards   []guardDecl[S]
	anyGuard []Guard[S]
	counts   []countDecl[S]
	aliases  []aliasDecl[S]
}

type aliasDecl[S comparable] struct {
	state S
	names []string
}

type edgeDecl[S comparable] struct {
	from, to S
	ret      bool
}

type guardDecl[S comparable] struct {
	from, to S
	g        Guard[S]
}

type countDecl[S comparable] struct {
	counter string
	from    S
	to      []S
}

// New starts a table whose executions begin in initial.
func New[S comparable](initial S) *Builder[S] {
	b := &Builder[S]{initial: initial, seenSet: map[S]bool{}}
	b.mention(initial)
	return b
}

func (b *Builder[S]) mention(s S) {
	if !b.seenSet[s] {
		b.seenSet[s] = true
		b.seen = append(b.seen, s)
	}
}

// States closes the set of states: once it is called, any state named
// elsewhere but not here is an error, which catches typos in a table of
// string states. It also fixes the order of [Table.States]. Without it the
// states are those named by New, Allow, Return and Terminal, in the order
// they were first named.
func (b *Builder[S]) States(states ...S) *Builder[S] {
	b.closed = true
	b.declared = append(b.declared, states...)
	return b
}

// Allow adds the moves from → each of to.
func (b *Builder[S]) Allow(from S, to ...S) *Builder[S] {
	b.mention(from)
	for _, t := range to {
		b.mention(t)
		b.edges = append(b.edges, edgeDecl[S]{from: from, to: t})
	}
	return b
}

// Return adds the moves from → each of to, where each is allowed only back
// to the state from was entered from. It models a state that remembers
// where it came from: Relocating, entered from Paused, may return to
// Paused but not to Running. A record or machine that has no memory of
// how it entered from (it was created there) may take none of them.
func (b *Builder[S]) Return(from S, to ...S) *Builder[S] {
	b.mention(from)
	for _, t := range to {
		b.mention(t)
		b.edges = append(b.edges, edgeDecl[S]{from: from, to: t, ret: true})
	}
	return b
}

// Terminal marks states as final: no move may leave them.
func (b *Builder[S]) Terminal(states ...S) *Builder[S] {
	for _, s := range states {
		b.mention(s)
	}
	b.terminal = append(b.terminal, states...)
	return b
}

// Declared reports whether Allow or Return declared the move from → to
// so far, and whether as a return edge: for code that completes a table
// with the moves its rules need (recovery.DefineLifecycle) without
// declaring one twice, which Build refuses.
func (b *Builder[S]) Declared(from, to S) (declared, isReturn bool) {
	for _, e := range b.edges {
		if e.from == from && e.to == to {
			return true, e.ret
		}
	}
	return false, false
}

// Guard adds g to the move from → to, which must be allowed. Guards of an
// edge run in the order they were added, after the guards added with
// [Builder.GuardAll]; the first that returns an error vetoes the move.
func (b *Builder[S]) Guard(from, to S, g Guard[S]) *Builder[S] {
	b.guards = append(b.guards, guardDecl[S]{from: from, to: to, g: g})
	return b
}

// GuardAll adds g to every move of the table.
func (b *Builder[S]) GuardAll(g Guard[S]) *Builder[S] {
	b.anyGuard = append(b.anyGuard, g)
	return b
}

// Alias makes [Table.Parse] read each of names as s, besides s's own
// text form, which is still what every write stores. A custom resource
// whose zero value means its first phase (a Volcano Job is created with
// an empty phase and is then pending) aliases "" to that state; a state
// renamed keeps its old name as an alias while old records remain. A
// name may alias one state, and no state's own text form.
func (b *Builder[S]) Alias(s S, names ...string) *Builder[S] {
	b.aliases = append(b.aliases, aliasDecl[S]{state: s, names: names})
	return b
}

// Count makes every move from → each of to add its time to the
// record's counter, in the same write as the move (see [Count]). The
// moves must be allowed; a move may add to several counters. Restarts
// of a job (Running → Restarting) are a count; so are submissions, or
// preemptions counted apart from failures.
func (b *Builder[S]) Count(counter string, from S, to ...S) *Builder[S] {
	b.counts = append(b.counts, countDecl[S]{counter: counter, from: from, to: to})
	return b
}

// Build validates the table and returns it. The error, a [*BuildError]
// matching [ErrInvalidTable], lists every problem: a state named but not
// declared, a duplicate edge or state, an edge leaving a terminal state, a
// state no path from the initial one reaches, a non-terminal state from
// which no terminal state can be reached (in a table without terminal
// states: from which the initial state cannot be reached again), a return
// edge that can never be taken, a guard on a move that is not allowed, a
// nil guard, a count on a move that is not allowed or with a counter name
// that is not one, two states with the same text form, more than
// [MaxStates] states.
func (b *Builder[S]) Build() (*Table[S], error) {
	if b == nil {
		return nil, &BuildError{Problems: []string{"nil Builder (use transition.New)"}}
	}
	p := &problems{}
	states := b.states(p)
	if len(states) > MaxStates {
		p.add("%d states, at most %d", len(states), MaxStates)
		return nil, &BuildError{Problems: p.list}
	}
	t := newTable(states, p)
	t.mark(b.initial, b.terminal)
	t.addEdges(b.edges, p)
	t.checkReturnEdges(p)
	t.addGuards(b.guards, b.anyGuard, p)
	t.addCounts(b.counts, p)
	t.addAliases(b.aliases, p)
	t.dense.addEdges(t.edges, t.n)
	if t.n > 0 {
		p.list = append(p.list, t.graphProblems()...)
	}
	if len(p.list) > 0 {
		return nil, &BuildError{Problems: p.list}
	}
	return t, nil
}

// problems collects what is wrong with a table, to report all at once.
type problems struct{ list []string }

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// states returns the table's states in declaration order: those given to
// States if it was called (each once, and every state an edge or a guard
// names among them), otherwise every state mentioned.
func (b *Builder[S]) states(p *problems) []S {
	if !b.closed {
		return b.seen
	}
	var states []S
	declared := map[S]bool{}
	for _, s := range b.declared {
		if declared[s] {
			p.add("state %s declared twice", nameOf(s))
			continue
		}
		declared[s] = true
		states = append(states, s)
	}
	for _, s := range b.seen {
		if !declared[s] {
			p.add("unknown state %s (not in States)", nameOf(s))
		}
	}
	return states
}

// newTable indexes states and checks their text forms.
func newTable[S comparable](states []S, p *problems) *Table[S] {
	t := &Table[S]{
		states:   append([]S(nil), states...),
		names:    make([]string, len(states)),
		byName:   make(map[string]uint8, len(states)),
		index:    make(map[S]uint8, len(states)),
		terminal: make([]bool, len(states)),
		n:        len(states),
		edges:    make([]uint8, len(states)*len(states)),
		guards:   map[int][]Guard[S]{},
	}
	for i, s := range states {
		t.index[s] = uint8(i)
		name := nameOf(s)
		t.names[i] = name
		switch {
		case name == "":
			p.add("state %#v (number %d of States) has an empty text form: give it a name (String(), or a non-empty string value)", s, i+1)
		case len(name) > MaxNameLen:
			p.add("state %.32q… has a text form of %d bytes, at most %d", name, len(name), MaxNameLen)
		case !utf8.ValidString(name):
			p.add("state %q has a text form that is not valid UTF-8", name)
		}
		if j, dup := t.byName[name]; dup {
			p.add("states %#v and %#v share the text form %q", states[j], s, name)
		}
		t.byName[name] = uint8(i)
	}
	t.dense = newDenseIndex(states)
	return t
}

// known returns the index of s while the table is being built (before
// the dense index has its edges).
func (t *Table[S]) known(s S) (int, bool) {
	i, ok := t.index[s]
	return int(i), ok
}

// mark records the initial and the terminal states; unknown ones are
// reported by states.
func (t *Table[S]) mark(initial S, terminal []S) {
	if i, ok := t.known(initial); ok {
		t.initial = uint8(i)
	}
	for _, s := range terminal {
		if i, ok := t.known(s); ok {
			t.terminal[i] = true
		}
	}
}

// addEdges fills the edge matrix, refusing self edges, duplicates and
// edges out of a terminal state.
func (t *Table[S]) addEdges(edges []edgeDecl[S], p *problems) {
	for _, e := range edges {
		i, ok1 := t.known(e.from)
		j, ok2 := t.known(e.to)
		if !ok1 || !ok2 {
			continue // reported as unknown by states
		}
		switch {
		case i == j:
			p.add("self edge %s → %s: writing the current state is always an idempotent no-op", t.names[i], t.names[j])
			continue
		case t.edges[i*t.n+j] != 0:
			p.add("duplicate edge %s → %s", t.names[i], t.names[j])
			continue
		case t.terminal[i]:
			p.add("edge %s → %s leaves terminal state %s", t.names[i], t.names[j], t.names[i])
		}
		flags := edgeAllowed
		if e.ret {
			flags |= edgeReturn
		}
		t.edges[i*t.n+j] = flags
	}
}

// checkReturnEdges refuses a return edge R → X that can never be taken:
// it is taken only after X → R.
func (t *Table[S]) checkReturnEdges(p *problems) {
	for i := range t.n {
		for j := range t.n {
			if t.edges[i*t.n+j]&edgeReturn != 0 && t.edges[j*t.n+i] == 0 {
				p.add("return edge %s → %s can never be taken: %s has no edge into %s", t.names[i], t.names[j], t.names[j], t.names[i])
			}
		}
	}
}

// addGuards attaches the edge guards and the table-wide ones.
func (t *Table[S]) addGuards(guards []guardDecl[S], anyGuard []Guard[S], p *problems) {
	for _, g := range guards {
		i, ok1 := t.known(g.from)
		j, ok2 := t.known(g.to)
		switch {
		case !ok1 || !ok2:
			p.add("guard on %s → %s names an unknown state", nameOf(g.from), nameOf(g.to))
		case g.g == nil:
			p.add("nil guard on %s → %s", t.names[i], t.names[j])
		case t.edges[i*t.n+j] == 0:
			p.add("guard on %s → %s, which is not an allowed edge", t.names[i], t.names[j])
		default:
			t.edges[i*t.n+j] |= edgeGuarded
			t.guards[i*t.n+j] = append(t.guards[i*t.n+j], g.g)
		}
	}
	for k, g := range anyGuard {
		if g == nil {
			p.add("nil guard %d in GuardAll", k)
		}
	}
	t.anyGuard = append([]Guard[S](nil), anyGuard...)
	t.guarded = len(t.anyGuard) > 0 || len(t.guards) > 0
}

// graphProblems reports unreachable states and traps.
func (t *Table[S]) graphProblems() []string {
	var problems []string
	fromInitial := t.reach(int(t.initial), false)
	for i := range t.n {
		if !fromInitial[i] {
			problems = append(problems, fmt.Sprintf("state %s is unreachable from initial state %s", t.names[i], t.names[t.initial]))
		}
	}
	// Walk edges backwards from the goal: terminal states, or in a table
	// without any, the initial state (a cycle must be able to come round).
	goal := make([]bool, t.n)
	hasTerminal := false
	for i, term := range t.terminal {
		if term {
			goal[i], hasTerminal = true, true
		}
	}
	if !hasTerminal {
		goal[t.initial] = true
	}
	canFinish := t.reachAny(goal, true)
	for i := range t.n {
		if canFinish[i] || !fromInitial[i] {
			continue
		}
		if hasTerminal {
			problems = append(problems, fmt.Sprintf("state %s is a trap: no terminal state can be reached from it", t.names[i]))
		} else {
			problems = append(problems, fmt.Sprintf("state %s is a trap: the table has no terminal state and the initial state %s cannot be reached again from it", t.names[i], t.names[t.initial]))
		}
	}
	return problems
}

func (t *Table[S]) reach(start int, backwards bool) []bool {
	goal := make([]bool, t.n)
	goal[start] = true
	return t.reachAny(goal, backwards)
}

// reachAny returns the states reachable from any goal state (backwards:
// the states that can reach one).
func (t *Table[S]) reachAny(goal []bool, backwards bool) []bool {
	seen := append([]bool(nil), goal...)
	var stack []int
	for i, g := range goal {
		if g {
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for j := range t.n {
			e := t.edges[i*t.n+j]
			if backwards {
				e = t.edges[j*t.n+i]
			}
			if e != 0 && !seen[j] {
				seen[j] = true
				stack = append(stack, j)
			}
		}
	}
	return seen
}

// nameOf is the text form of a state: its String method if it has one
// (fmt would pick an Error method first, which a state has no business
// having), otherwise fmt.Sprint.
func nameOf[S comparable](s S) string {
	if st, ok := any(s).(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprint(s)
}

// lookup returns the index of s in the table.
func (t *Table[S]) lookup(s S) (int, bool) {
	if t.dense.ok {
		return denseLookup(&t.dense, s)
	}
	i, ok := t.index[s]
	return int(i), ok
}

// Allowed reports whether the table has the move from → to. It is a
// constant-time test and allocates nothing. It says nothing of guards or
// of where a return edge leads back to; [Machine.Fire] and
// [Persisted.Fire] check those.
func (t *Table[S]) Allowed(from, to S) bool {
	if d := &t.dense; d.edges != nil {
		a, b := readUint(unsafe.Pointer(&from), d.size), readUint(unsafe.Pointer(&to), d.size)
		return a < d.width && b < d.width && d.edges[a*d.width+b] != 0
	}
	i, ok1 := t.lookup(from)
	j, ok2 := t.lookup(to)
	return ok1 && ok2 && t.edges[i*t.n+j] != 0
}

// IsReturn reports whether from → to is a return edge (see
// [Builder.Return]).
func (t *Table[S]) IsReturn(from, to S) bool {
	i, ok1 := t.lookup(from)
	j, ok2 := t.lookup(to)
	return ok1 && ok2 && t.edges[i*t.n+j]&edgeReturn != 0
}

// Returns reports whether from has a return edge: whether where a record
// in from may go next depends on the state it entered from from (its
// storage.Record.Previous).
func (t *Table[S]) Returns(from S) bool {
	i, ok := t.lookup(from)
	if !ok {
		return false
	}
	for j := range t.n {
		if t.edges[i*t.n+j]&edgeReturn != 0 {
			return true
		}
	}
	return false
}

// Guarded reports whether a move from → to runs guards.
func (t *Table[S]) Guarded(from, to S) bool {
	i, ok1 := t.lookup(from)
	j, ok2 := t.lookup(to)
	return ok1 && ok2 && t.edges[i*t.n+j] != 0 && (len(t.anyGuard) > 0 || t.edges[i*t.n+j]&edgeGuarded != 0)
}

// Has reports whether s is a state of the table.
func (t *Table[S]) Has(s S) bool {
	_, ok := t.lookup(s)
	return ok
}

// Initial returns the state executions begin in.
func (t *Table[S]) Initial() S {
	if t.n == 0 {
		var zero S
		return zero
	}
	return t.states[t.initial]
}

// usable returns an error naming ctor for a nil or zero Table: only
// Builder.Build makes a table.
func (t *Table[S]) usable(ctor string) error {
	if t == nil {
		return fmt.Errorf("transition: %s: nil table", ctor)
	}
	if t.n == 0 {
		return fmt.Errorf("transition: %s: the zero Table has no states: build one with New(...).Build()", ctor)
	}
	return nil
}

// IsTerminal reports whether s is a terminal state of the table.
func (t *Table[S]) IsTerminal(s S) bool {
	i, ok := t.lookup(s)
	return ok && t.terminal[i]
}

// States returns the states in declaration order. The slice is a copy.
func (t *Table[S]) States() []S { return append([]S(nil), t.states...) }

// LiveStatuses returns the text forms of the states that are not
// terminal, in declaration order: the statuses a store's status filter
// ([storage.Query].Statuses) selects to read the executions that have
// not ended, and none of those that have.
func (t *Table[S]) LiveStatuses() []string {
	var out []string
	for i, name := range t.names {
		if !t.terminal[i] {
			out = append(out, name)
		}
	}
	return out
}

// Len returns the number of states.
func (t *Table[S]) Len() int { return t.n }

// Next returns the states from may move to, in declaration order. It is
// empty for a terminal or unknown state.
func (t *Table[S]) Next(from S) []S {
	i, ok := t.lookup(from)
	if !ok {
		return nil
	}
	var next []S
	for j := range t.n {
		if t.edges[i*t.n+j] != 0 {
			next = append(next, t.states[j])
		}
	}
	return next
}

// Path returns a shortest sequence of moves the table allows from from to
// to: the states to move to, in order, ending with to. It is nil when
// from is to, when either is unknown, or when to cannot be reached. A
// return edge is taken only back to the state the path came from; the
// path does not know where from was entered from, so it takes none out of
// from itself. A controller walking a record along the path (reconciling
// it with the world) fires each state in turn.
func (t *Table[S]) Path(from, to S) []S {
	i, ok1 := t.lookup(from)
	j, ok2 := t.lookup(to)
	if !ok1 || !ok2 || i == j {
		return nil
	}
	// Breadth-first over (state, state before it): a return edge's
	// legality depends on the second.
	type node struct{ at, prev int }
	const none = -1
	start := node{i, none}
	parent := map[node]node{start: start}
	queue := []node{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for k := range t.n {
			flags := t.edges[cur.at*t.n+k]
			if flags == 0 || (flags&edgeReturn != 0 && k != cur.prev) {
				continue
			}
			next := node{k, cur.at}
			if _, seen := parent[next]; seen {
				continue
			}
			parent[next] = cur
			if k == j {
				var path []S
				for n := next; n != start; n = parent[n] {
					path = append(path, t.states[n.at])
				}
				slices.Reverse(path)
				return path
			}
			queue = append(queue, next)
		}
	}
	return nil
}

// Name returns the text form of s as records store it. For a state the
// table does not know, it returns the same text form and false.
func (t *Table[S]) Name(s S) (string, bool) {
	i, ok := t.lookup(s)
	if !ok {
		return nameOf(s), false
	}
	return t.names[i], true
}

// ErrUnknownState is matched by [Table.Parse] errors: a text that names
// no state of the table. (A move to a state the table lacks is an
// [*Error] matching [ErrNotAllowed], like any move the table refuses.)
// It is the same error as state.ErrUnknownStatus: errors.Is matches
// either name, whether a table or state.Parse refused the text.
var ErrUnknownState = unknown.ErrState

// Parse returns the state whose text form is text. The error matches
// [ErrUnknownState] and lists the table's states.
func (t *Table[S]) Parse(text string) (S, error) {
	if i, ok := t.byName[text]; ok {
		return t.states[i], nil
	}
	if i, ok := t.aliases[text]; ok {
		return t.states[i], nil
	}
	var zero S
	return zero, fmt.Errorf("transition: %w %s (valid: %s)", ErrUnknownState, quote.Limited(text), strings.Join(t.names, ", "))
}

// guardsFor returns the guards of the edge i → j, table-wide ones first.
func (t *Table[S]) guardsFor(i, j int) (all, edge []Guard[S]) {
	if t.edges[i*t.n+j]&edgeGuarded != 0 {
		edge = t.guards[i*t.n+j]
	}
	return t.anyGuard, edge
}

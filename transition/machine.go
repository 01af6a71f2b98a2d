package transition

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Machine is the state of one execution in memory, moved by [Machine.Fire]
// along the edges of its [Table]. It is safe for concurrent use, and
// concurrent Fire calls are linearizable: each takes effect at one instant
// between its call and its return, and each caller gets its own result.
//
// Without guards or observers a Fire is one atomic compare-and-swap of a
// single word (current state, the state it came from, a change count) and
// allocates nothing. With observers, writes take a short lock so that
// observers see changes in the order they happened.
type Machine[S comparable] struct {
	table  *Table[S]
	word   atomic.Uint64
	notify *notifier[S]
	fails  *failureReporter[S]
	mu     sync.Mutex // orders writes and notifications, only with observers
	clock  func() time.Time
	actor  string
	id     string
}

// The packed machine word: bits 0–7 current state index, 8–15 the index
// of the state it was entered from plus one (0: none), 16–63 the number
// of changes so far. 48 bits of changes do not wrap in practice (a
// hundred years at 80,000 changes a second).
const (
	prevShift = 8
	seqShift  = 16
	noPrev    = 0
)

func pack(cur, prevPlus1 int, seq uint64) uint64 {
	return uint64(cur) | uint64(prevPlus1)<<prevShift | seq<<seqShift
}

func unpack(w uint64) (cur, prevPlus1 int, seq uint64) {
	return int(w & 0xff), int(w >> prevShift & 0xff), w >> seqShift
}

// NewMachine returns a machine over table in its initial state, telling
// observers of its changes.
func NewMachine[S comparable](table *Table[S], opts MachineOptions, observers ...Observers[S]) (*Machine[S], error) {
	if err := table.usable("NewMachine"); err != nil {
		return nil, err
	}
	return newMachine(table, int(table.initial), opts, observers)
}

// NewMachineAt returns a machine over table in state start, for a machine
// rebuilt from a state read elsewhere. It remembers no earlier state, so
// return edges out of start are closed until it moves. A start the table
// does not have is [ErrUnknownState].
func NewMachineAt[S comparable](table *Table[S], start S, opts MachineOptions, observers ...Observers[S]) (*Machine[S], error) {
	if err := table.usable("NewMachineAt"); err != nil {
		return nil, err
	}
	i, known := table.lookup(start)
	if !known {
		return nil, fmt.Errorf("transition: NewMachineAt: %w %s", ErrUnknownState, quote.Limited(nameOf(start)))
	}
	return newMachine(table, i, opts, observers)
}

func newMachine[S comparable](table *Table[S], start int, opts MachineOptions, observers []Observers[S]) (*Machine[S], error) {
	s, err := machineSettings(opts, observers)
	if err != nil {
		return nil, err
	}
	m := &Machine[S]{table: table, notify: newNotifier(s.observers, s.onPanic), fails: newFailureReporter(s.failures, s.onPanic),
		clock: s.clock, actor: s.actor, id: s.id}
	m.word.Store(pack(start, noPrev, 0))
	return m, nil
}

// State returns the current state (the zero S for a zero Machine).
func (m *Machine[S]) State() S {
	if m.table == nil {
		var zero S
		return zero
	}
	cur, _, _ := unpack(m.word.Load())
	return m.table.states[cur]
}

// Previous returns the state the current one was entered from, and false
// if the machine has not moved since it was made.
func (m *Machine[S]) Previous() (S, bool) {
	_, prev, _ := unpack(m.word.Load())
	if prev == noPrev || m.table == nil {
		var zero S
		return zero, false
	}
	return m.table.states[prev-1], true
}

// Table returns the machine's table.
func (m *Machine[S]) Table() *Table[S] { return m.table }

// Fire moves the machine to the state to and returns the [Step] it took.
// Moving to the current state succeeds and changes nothing (Step.Changed
// reports false; guards and observers are not consulted). A move the
// table does not allow returns an [*Error] matching [ErrNotAllowed]; a
// guard's veto one matching [ErrGuard]. A done ctx returns its error
// before anything changes, and again after the guards ran. Guards,
// observers and OnFailure functions get the whole [Change].
func (m *Machine[S]) Fire(ctx context.Context, to S, reason string) (Step[S], error) {
	t := m.table
	if ctx == nil || t == nil || m.notify != nil || m.fails != nil || t.guarded {
		return m.fireChecked(ctx, to, reason)
	}
	// The hot path: no clock, no lock, one compare-and-swap.
	if err := ctx.Err(); err != nil {
		return Step[S]{}, err
	}
	// t.lookup, by hand: the generic method is over the inlining budget,
	// and its call is a tenth of this path.
	var j int
	var ok bool
	if t.dense.ok {
		j, ok = denseLookup(&t.dense, to)
	} else {
		j, ok = t.lookup(to)
	}
	if !ok {
		return Step[S]{}, m.notInTable(to)
	}
	for {
		w := m.word.Load()
		i, prev, seq := unpack(w)
		if i == j {
			return Step[S]{From: to, To: to, Revision: seq}, nil
		}
		if flags := t.edges[i*t.n+j]; flags != edgeAllowed {
			if err := checkEdge(t, m.id, i, j, prev, flags); err != nil {
				return Step[S]{}, err
			}
		}
		if m.word.CompareAndSwap(w, pack(j, i+1, seq+1)) {
			return Step[S]{From: t.states[i], To: to, Revision: seq + 1}, nil
		}
	}
}

// fireChecked is Fire on every path but the hot one: a nil ctx, a zero
// Machine, guards or observers.
func (m *Machine[S]) fireChecked(ctx context.Context, to S, reason string) (Step[S], error) {
	t := m.table
	if t == nil {
		return Step[S]{}, errZeroMachine
	}
	asked := func() Failure[S] {
		cur, _, seq := unpack(m.word.Load())
		return Failure[S]{Move: Change[S]{ID: m.id, From: t.states[cur], To: to, Reason: reason, Actor: m.actor, Revision: seq}, Decided: true}
	}
	if err := storage.CheckContext(ctx, "transition", "Fire"); err != nil {
		return Step[S]{}, m.fails.fail(asked(), err)
	}
	j, ok := t.lookup(to)
	if !ok {
		return Step[S]{}, m.fails.fail(asked(), m.notInTable(to))
	}
	c, err := m.fireSlow(ctx, j, to, reason)
	if err != nil {
		return Step[S]{}, m.fails.fail(Failure[S]{Move: c, Decided: true}, err)
	}
	return Step[S]{From: c.From, To: c.To, Revision: c.Revision}, nil
}

// notInTable is the error for a move to a state the table does not have.
func (m *Machine[S]) notInTable(to S) error {
	cur, _, _ := unpack(m.word.Load())
	return &Error{ID: m.id, From: m.table.names[cur], To: quote.Limited(nameOf(to)), Reason: "not a state of the table"}
}

// fireSlow is Fire with guards or observers: the change is stamped, the
// guards run before the swap, and with observers the swap and the queueing
// of the change happen under the lock that keeps them in order. A refused
// move comes back with its error, for the OnFailure observers.
func (m *Machine[S]) fireSlow(ctx context.Context, j int, to S, reason string) (Change[S], error) {
	t := m.table
	for {
		w := m.word.Load()
		i, prev, seq := unpack(w)
		c := Change[S]{ID: m.id, From: t.states[i], To: to, Reason: reason, Actor: m.actor, Revision: seq}
		if i == j {
			return c, nil
		}
		flags := t.edges[i*t.n+j]
		if err := checkEdge(t, m.id, i, j, prev, flags); err != nil {
			return c, err
		}
		c.At = m.clock()
		if flags&edgeGuarded != 0 || len(t.anyGuard) > 0 {
			if err := runGuards(ctx, t, i, j, c, View{}); err != nil {
				return c, err
			}
			if err := ctx.Err(); err != nil {
				return c, err
			}
		}
		next := pack(j, i+1, seq+1)
		c.Revision = seq + 1
		if m.notify == nil {
			if m.word.CompareAndSwap(w, next) {
				return c, nil
			}
			continue
		}
		m.mu.Lock()
		if !m.word.CompareAndSwap(w, next) {
			m.mu.Unlock()
			continue
		}
		m.notify.enqueue(c)
		m.mu.Unlock()
		m.notify.drain()
		return c, nil
	}
}

// successors lists the states i moves to, for an error.
func (t *Table[S]) successors(i int) string {
	var to []string
	for _, s := range t.Next(t.states[i]) {
		name, _ := t.Name(s)
		to = append(to, name)
	}
	if len(to) == 0 {
		return "nowhere"
	}
	return strings.Join(to, ", ")
}

// checkEdge returns the refusal for the move i → j with the given flags,
// where prevPlus1 is the state i was entered from plus one (0: unknown).
func checkEdge[S comparable](t *Table[S], id string, i, j, prevPlus1 int, flags uint8) error {
	switch {
	case flags == 0 && t.terminal[i]:
		return notAllowed(id, t.names[i], t.names[j], t.names[i]+" is terminal")
	case flags == 0:
		return notAllowed(id, t.names[i], t.names[j], "no such edge ("+t.names[i]+" moves to "+t.successors(i)+
			"); if the move is right, add Allow("+strconv.Quote(t.names[i])+", "+strconv.Quote(t.names[j])+") to the table")
	case flags&edgeReturn != 0 && prevPlus1 == noPrev:
		return notAllowed(id, t.names[i], t.names[j],
			t.names[i]+" returns only to the state it was entered from, and that is unknown")
	case flags&edgeReturn != 0 && prevPlus1-1 != j:
		return notAllowed(id, t.names[i], t.names[j],
			t.names[i]+" returns only to "+t.names[prevPlus1-1]+", the state it was entered from")
	}
	return nil
}

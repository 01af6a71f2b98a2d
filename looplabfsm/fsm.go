package looplabfsm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/looplab/fsm"
)

// ErrReentrant is returned by [FSM.Event] called from a before_ or leave_
// callback of the event in progress. looplab/fsm holds its event lock
// through those callbacks, so its own Event would wait for itself for
// ever; from enter_ and after_ callbacks, where the lock is released,
// firing an event works and is persisted like any other.
var ErrReentrant = errors.New("looplabfsm: event fired from a before_ or leave_ callback, which looplab/fsm deadlocks on")

// StaleError is an event refused because the store no longer holds the
// state the FSM is in: another writer (a cluster master, an operator, a
// successor) moved the execution since this FSM last wrote. The event is
// cancelled; [FSM.Sync] brings the FSM to the stored state. It matches
// [storage.ErrConflict].
type StaleError struct {
	ID     string // the record's id
	Event  string // the event refused
	Memory string // the FSM's state
	Stored string // the store's state
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("looplabfsm: %s: event %q from %q: the store holds %q: %v", e.ID, e.Event, e.Memory, e.Stored, storage.ErrConflict)
}

// Is makes errors.Is(err, storage.ErrConflict) hold.
func (e *StaleError) Is(target error) bool { return target == storage.ErrConflict }

// Options configure [Open].
type Options struct {
	// Events define the machine, as for fsm.NewFSM. Every move they make
	// must be allowed by the Persisted's table; [Table] builds the table
	// that allows exactly them.
	Events fsm.Events
	// Callbacks are looplab/fsm's callbacks, under its names
	// (before_<EVENT>, leave_<STATE>, enter_state, <EVENT>, …), called in
	// its order. A callback that cancels the event (Event.Cancel in a
	// before_ or leave_ callback) cancels it before anything is written.
	Callbacks fsm.Callbacks
	// Lease, if its Holder is set, takes the execution over through the
	// store's ownership before the FSM is returned (see
	// [transition.Persisted.Acquire]; the Persisted becomes the
	// controller's): the FSM then writes under the new claim and is
	// fenced once a successor takes it. With no Holder the FSM writes as
	// the Persisted does: as an outside authority, or as the controller
	// that already took the execution over.
	Lease storage.Lease
}

// FSM is a looplab/fsm machine whose every transition is written to a
// store before the machine makes it, with the event's name as the reason
// of its audit entry, by compare-and-swap and under the ownership the
// Persisted holds.
//
// The write comes after the last leave_ callback: a callback may cancel
// the event before that, and so may the context given to Event, and once
// the move is written nothing cancels it. (looplab/fsm looks at the
// event's context once more, after the leave_ callbacks; FSM gives it a
// context whose cancellation it checks itself, before the write, so that
// a context cancelled just after the write cannot leave the machine
// behind the store.) Every callback still gets a context that ends with
// the one given to Event, so that a callback waiting on it (an enter_
// callback finishing its work when the caller gives up) returns: the
// caller's context bounds the event, and its error is the event's. A
// callback that ignores its context cannot be stopped: it must return
// on its own. A write that fails cancels
// the event, as Event.Cancel would: looplab/fsm stays in its state and
// Event returns a fsm.CanceledError that unwraps to the reason,
// matchable with errors.Is: [storage.ErrFenced] (the execution was taken
// over, or the ownership lost), [storage.ErrConflict] (a [*StaleError]:
// someone else moved it), [transition.ErrNotAllowed] or
// [transition.ErrGuard] (the Persisted's table refused the move). So the
// machine in memory never runs ahead of the store.
//
// Asynchronous transitions (Event.Async in a leave_ callback) are written
// when they complete, by [FSM.Transition]: use it, not looplab/fsm's.
//
// Fire events with [FSM.Event], or from enter_ and after_ callbacks with
// e.FSM.Event as looplab/fsm allows: both are persisted. Setting the state
// on the looplab/fsm machine directly (SetState) is not.
type FSM struct {
	machine *fsm.FSM
	p       *transition.Persisted[string]

	mu      sync.Mutex
	pending *move // an asynchronous transition begun and not yet written
	// pendingCtx is the pending transition's context, as looplab/fsm's
	// AsyncError gave it: cancelled by AsyncError.CancelTransition.
	pendingCtx context.Context
}

// callerKey carries, in the context looplab/fsm hands its callbacks, the
// context the caller gave Event: its cancellation is checked before the
// move is written, and the write is made under it.
type callerKey struct{}

// caller returns the context the caller of Event gave, or ctx itself for
// an event fired on the looplab/fsm machine directly.
func caller(ctx context.Context) context.Context {
	if c, ok := ctx.Value(callerKey{}).(context.Context); ok {
		return c
	}
	return ctx
}

// machineContext is what looplab/fsm is given for an event fired with
// ctx: ctx's values, and no cancellation of its own (see [FSM]).
func machineContext(ctx context.Context) context.Context {
	return context.WithValue(context.WithoutCancel(ctx), callerKey{}, caller(ctx))
}

// move is one event's transition.
type move struct{ event, src, dst string }

// reentrantKey marks the context handed to before_ and leave_ callbacks.
type reentrantKey struct{}

// asyncField locates looplab/fsm's unexported flag for an asynchronous
// transition: a leave_ callback that sets it (Event.Async) must not have
// its move written until the transition completes, and nothing else
// tells. Read, never written; Open refuses a looplab/fsm without it.
var asyncField = func() []int {
	f, ok := reflect.TypeFor[fsm.Event]().FieldByName("async")
	if !ok || f.Type.Kind() != reflect.Bool {
		return nil
	}
	return f.Index
}()

func isAsync(e *fsm.Event) bool {
	return reflect.ValueOf(e).Elem().FieldByIndex(asyncField).Bool()
}

// Open returns the FSM of the execution p names, at the state its record
// holds. A missing record is created first, in the table's initial state
// with the reason "created", so the first process to start an execution
// and every restarted one call the same thing. With opts.Lease it takes
// the execution over (a live holder is refused with an error matching
// [storage.ErrHeld], or waited for with Lease.Wait), as every controller
// does at startup.
//
// The error matches [transition.ErrInvalidTable] when the events do not
// fit p's table: a move it does not allow, a state it does not have.
func Open(ctx context.Context, p *transition.Persisted[string], opts Options) (*FSM, error) {
	if err := storage.CheckContext(ctx, "looplabfsm", "Open"); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errors.New("looplabfsm: Open: nil Persisted (use transition.NewPersisted)")
	}
	if asyncField == nil {
		return nil, errors.New("looplabfsm: Open: this version of looplab/fsm has no asynchronous-transition flag in fsm.Event; use v1.0.3 or a compatible one")
	}
	table := p.Table()
	if table == nil {
		return nil, errors.New("looplabfsm: Open: zero Persisted (use transition.NewPersisted)")
	}
	m, problems := read(table.Initial(), opts.Events)
	problems = append(problems, fit(m, table)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("looplabfsm: Open %s: the events do not fit the table: %w", p.ID(), &transition.BuildError{Problems: problems})
	}
	cur, err := loadOrCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	if opts.Lease.Holder != "" {
		_, rec, err := p.Acquire(ctx, opts.Lease, nil)
		if err != nil {
			return nil, err
		}
		if cur, err = table.Parse(rec.Status); err != nil {
			return nil, err
		}
	}
	f := &FSM{p: p}
	f.machine = fsm.NewFSM(cur, opts.Events, f.callbacks(m, opts.Callbacks))
	return f, nil
}

// New is [Open] for the common case, from the definition alone: it
// builds the table of initial and opts.Events ([Table]) and the execution
// id's Persisted on store, writing as actor (opts.Lease.Holder when actor
// is empty), then opens it. Those who need the Persisted's other options
// (observers, a history length, a clock) build it and call Open.
func New(ctx context.Context, store storage.Store, id, initial, actor string, opts Options) (*FSM, error) {
	table, err := Table(initial, opts.Events)
	if err != nil {
		return nil, err
	}
	if actor == "" {
		actor = opts.Lease.Holder
	}
	p, err := transition.NewPersisted(table, store, id, transition.PersistedOptions{Actor: actor})
	if err != nil {
		return nil, err
	}
	return Open(ctx, p, opts)
}

// fit lists what keeps the events from running over table.
func fit(m *machine, table *transition.Table[string]) []string {
	var problems []string
	for _, s := range m.states {
		switch {
		case s == "state":
			// looplab/fsm reads leave_state and enter_state as the
			// callbacks of every state, never as this one's.
			problems = append(problems, `a state named "state": looplab/fsm's callback names cannot tell it from every state`)
		case s != "" && !table.Has(s):
			problems = append(problems, fmt.Sprintf("state %q is not a state of the table", s))
		}
	}
	for _, e := range m.edges {
		if table.Has(e[0]) && table.Has(e[1]) && !table.Allowed(e[0], e[1]) {
			problems = append(problems, fmt.Sprintf("the table does not allow %q → %q", e[0], e[1]))
		}
	}
	return problems
}

// loadOrCreate returns the stored state, creating the record first if
// there is none.
func loadOrCreate(ctx context.Context, p *transition.Persisted[string]) (string, error) {
	cur, _, err := p.Load(ctx)
	if !errors.Is(err, storage.ErrNotFound) {
		return cur, err
	}
	initial := p.Table().Initial()
	_, err = p.Create(ctx, transition.To(initial).Because("created"))
	if errors.Is(err, storage.ErrExists) { // created meanwhile by another process
		cur, _, err = p.Load(ctx)
		return cur, err
	}
	return initial, err
}

// callbacks returns the user's callbacks with the writes woven in: every
// before_ and leave_ callback gets a context that [FSM.Event] recognises,
// the general before_event checks the ownership, and each state gets a
// leave_<STATE> that runs the user's leave_<STATE> and leave_state, as
// looplab/fsm would, and then writes the move.
func (f *FSM) callbacks(m *machine, user fsm.Callbacks) fsm.Callbacks {
	out := fsm.Callbacks{}
	var beforeAny, leaveAny fsm.Callback
	for name, cb := range user {
		switch {
		case cb == nil:
		case name == "before_event":
			beforeAny = cb
		case name == "leave_state":
			leaveAny = cb
		case strings.HasPrefix(name, "leave_"):
			// Run by the state's own leave_ below.
		case strings.HasPrefix(name, "before_"):
			out[name] = f.locked(cb)
		default:
			out[name] = bounded(cb)
		}
	}
	out["before_event"] = func(ctx context.Context, e *fsm.Event) {
		if err := caller(ctx).Err(); err != nil {
			e.Cancel(err) // the caller gave up: nothing runs, nothing is written
			return
		}
		if beforeAny != nil {
			if f.locked(beforeAny)(ctx, e); ctx.Err() != nil {
				return
			}
		}
		// No use running the leave_ callbacks of a move that cannot be
		// written.
		if own := f.p.Ownership(); own != nil {
			select {
			case <-own.Lost():
				c := f.p.Claim()
				e.Cancel(fmt.Errorf("looplabfsm: event %q: %w", e.Event,
					&storage.FencedError{ID: f.p.ID(), Owner: c.Owner, Epoch: c.Epoch, Lost: true}))
			default:
			}
		}
	}
	for _, s := range m.states {
		named := user["leave_"+s]
		out["leave_"+s] = func(ctx context.Context, e *fsm.Event) {
			mv := move{event: e.Event, src: e.Src, dst: e.Dst}
			for _, cb := range []fsm.Callback{named, leaveAny} {
				if cb == nil {
					continue
				}
				f.locked(cb)(ctx, e)
				if ctx.Err() != nil {
					return // cancelled: looplab/fsm moves nowhere
				}
				if isAsync(e) {
					f.mu.Lock()
					f.pending = &mv
					f.mu.Unlock()
					return
				}
			}
			if err := f.write(caller(ctx), mv); err != nil {
				e.Cancel(err)
			}
		}
	}
	return out
}

// locked wraps a before_ or leave_ callback: looplab/fsm holds its event
// lock while it runs.
func (f *FSM) locked(cb fsm.Callback) fsm.Callback {
	return bounded(func(ctx context.Context, e *fsm.Event) {
		cb(context.WithValue(ctx, reentrantKey{}, f), e)
	})
}

// bounded wraps a user's callback so that the context it gets ends when
// the caller's context ends, as looplab/fsm's own would: looplab/fsm is
// given a context that nothing cancels (so that a move written is made),
// and a callback waiting on it would wait for ever. Its Err is
// context.Canceled and its context.Cause the caller's error (a deadline,
// say). Once the move is written the machine makes it whatever the
// callback does; before, a caller that gave up writes nothing.
func bounded(cb fsm.Callback) fsm.Callback {
	return func(ctx context.Context, e *fsm.Event) {
		c, cancel := context.WithCancelCause(ctx)
		from := caller(ctx)
		stop := context.AfterFunc(from, func() { cancel(context.Cause(from)) })
		defer func() {
			stop()
			cancel(nil)
		}()
		cb(c, e)
	}
}

// write stores mv: by compare-and-swap, from the state the FSM is in.
func (f *FSM) write(ctx context.Context, mv move) error {
	_, _, err := f.p.Apply(ctx, func(cur string, _ storage.Record) (transition.Update[string], error) {
		if cur != mv.src {
			return transition.Update[string]{}, &StaleError{ID: f.p.ID(), Event: mv.event, Memory: mv.src, Stored: cur}
		}
		return transition.To(mv.dst).Because(mv.event), nil
	})
	if err != nil {
		return fmt.Errorf("looplabfsm: event %q (%s → %s) not written: %w", mv.event, mv.src, mv.dst, err)
	}
	return nil
}

// Event fires event as looplab/fsm's Event does, args going to the
// callbacks; the transition is written before the machine makes it (see
// [FSM]). Called from a before_ or leave_ callback of this FSM (with the
// context the callback was given), it returns [ErrReentrant] instead of
// deadlocking as looplab/fsm would.
func (f *FSM) Event(ctx context.Context, event string, args ...any) error {
	if err := f.check(ctx, "Event"); err != nil {
		return err
	}
	if ctx.Value(reentrantKey{}) == f {
		return fmt.Errorf("looplabfsm: Event %q: %w", event, ErrReentrant)
	}
	err := f.machine.Event(machineContext(ctx), event, args...)
	var async fsm.AsyncError
	if errors.As(err, &async) {
		f.mu.Lock()
		if f.pending != nil {
			f.pendingCtx = async.Ctx
		}
		f.mu.Unlock()
	}
	return err
}

// Transition completes an asynchronous transition (one a leave_ callback
// made asynchronous with Event.Async): it writes the move, then lets
// looplab/fsm make it and run the enter_ and after_ callbacks. If the
// write fails the machine stays in transition, as looplab/fsm leaves it,
// and the error says why; a later Transition tries the write again. A
// transition cancelled with AsyncError.CancelTransition is not written,
// and looplab/fsm leaves the machine where it was, as it would. One
// cancelled while its write is under way (CancelTransition racing
// Transition) is written all the same: the machine is then set to the
// state the store holds, without its enter_ and after_ callbacks, and
// the error says so.
func (f *FSM) Transition(ctx context.Context) error {
	if err := f.check(ctx, "Transition"); err != nil {
		return err
	}
	f.mu.Lock()
	mv, asyncCtx := f.pending, f.pendingCtx
	f.mu.Unlock()
	if mv == nil {
		return f.machine.Transition()
	}
	if asyncCtx == nil || asyncCtx.Err() == nil {
		if err := f.write(ctx, *mv); err != nil {
			return err
		}
	}
	f.mu.Lock()
	if f.pending == mv {
		f.pending, f.pendingCtx = nil, nil
	}
	f.mu.Unlock()
	err := f.machine.Transition()
	if asyncCtx != nil && asyncCtx.Err() != nil && f.machine.Current() == mv.src {
		// Cancelled: written or not, the machine and the store must agree.
		stored, _, lerr := f.p.Load(ctx)
		if lerr != nil {
			return fmt.Errorf("looplabfsm: Transition %s: event %q cancelled; reading the store to agree with it: %w", f.p.ID(), mv.event, lerr)
		}
		if stored != mv.src {
			f.machine.SetState(stored)
			return fmt.Errorf("looplabfsm: Transition %s: event %q was cancelled after its move to %s was written; the machine is set to %s, as stored, without its enter_ and after_ callbacks", f.p.ID(), mv.event, mv.dst, stored)
		}
	}
	return err
}

// Sync sets the machine to the state the store holds, without callbacks
// (as looplab/fsm's SetState), after a [*StaleError] or whenever the
// store may have moved on. It refuses while an asynchronous transition
// is pending.
func (f *FSM) Sync(ctx context.Context) error {
	if err := f.check(ctx, "Sync"); err != nil {
		return err
	}
	// Not held while setting the state: a leave_ callback of an event in
	// progress takes f.mu while looplab/fsm holds the state's lock.
	f.mu.Lock()
	pending := f.pending
	f.mu.Unlock()
	if pending != nil {
		return fmt.Errorf("looplabfsm: Sync %s: event %q is in transition; complete it with Transition first", f.p.ID(), pending.event)
	}
	cur, _, err := f.p.Load(ctx)
	if err != nil {
		return err
	}
	f.machine.SetState(cur)
	return nil
}

// errZeroFSM is what a zero FSM's methods that would write return.
var errZeroFSM = errors.New("looplabfsm: zero FSM: get one with Open")

// check refuses a nil or done ctx and a zero FSM.
func (f *FSM) check(ctx context.Context, op string) error {
	if err := storage.CheckContext(ctx, "looplabfsm", op); err != nil {
		return err
	}
	if f.machine == nil {
		return errZeroFSM
	}
	return nil
}

// Current returns the machine's state ("" for a zero FSM).
func (f *FSM) Current() string {
	if f.machine == nil {
		return ""
	}
	return f.machine.Current()
}

// Is reports whether state is the machine's state.
func (f *FSM) Is(state string) bool { return f.machine != nil && f.machine.Is(state) }

// Can reports whether event can fire in the machine's state (looplab/fsm's
// answer: the store may still refuse it).
func (f *FSM) Can(event string) bool { return f.machine != nil && f.machine.Can(event) }

// AvailableTransitions returns the events that can fire in the machine's
// state.
func (f *FSM) AvailableTransitions() []string {
	if f.machine == nil {
		return nil
	}
	return f.machine.AvailableTransitions()
}

// Persisted returns the handle the FSM writes through: its Ownership's
// Lost channel says when the execution must no longer be driven.
func (f *FSM) Persisted() *transition.Persisted[string] { return f.p }

// Looplab returns the looplab/fsm machine, for what this type does not
// wrap (metadata, visualizers). Its Event is persisted as this FSM's is;
// its SetState and Transition are not.
func (f *FSM) Looplab() *fsm.FSM { return f.machine }

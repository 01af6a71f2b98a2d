// Package bench builds the same transition tables in execfsm and in the
// libraries a user might pick instead, looplab/fsm and qmuntal/stateless,
// so that their benchmarks compare like with like. The peers' tables are
// derived from execfsm's (teraslice.Lifecycle is the one place the lifecycle
// is written down); a parity test checks that all three accept and
// refuse exactly the same moves.
//
// Both peers fire events (triggers), not target states. The translation:
// one event per target state T, named "to_T", allowed from every state
// with an edge into T. Firing the current state is execfsm's idempotent
// no-op and has no peer equivalent, so parity is over moves between
// different states; relocating's memory of where it came from has no
// peer equivalent either, so the peers allow all of relocating's return
// edges and the walks the benchmarks take always return where they came
// from.
package bench

import (
	"context"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/looplab/fsm"
	"github.com/qmuntal/stateless"
)

// Event is the peer event that moves to target.
func Event(target string) string { return "to_" + target }

// Toggle is the two-state table: off ⇄ on.
func Toggle() (*transition.Table[string], error) {
	return transition.New("off").Allow("off", "on").Allow("on", "off").Build()
}

// Names returns the text form of every state of t, in declaration order.
func Names[S comparable](t *transition.Table[S]) []string {
	var out []string
	for _, s := range t.States() {
		n, _ := t.Name(s)
		out = append(out, n)
	}
	return out
}

// edges returns, for every target state, the states with an edge into it.
func edges[S comparable](t *transition.Table[S]) map[string][]string {
	into := map[string][]string{}
	for _, from := range t.States() {
		fromName, _ := t.Name(from)
		for _, to := range t.Next(from) {
			toName, _ := t.Name(to)
			into[toName] = append(into[toName], fromName)
		}
	}
	return into
}

// Guarded lists the moves the guarded benchmarks put a guard on.
type Guarded map[[2]string]bool

// Looplab builds t in looplab/fsm, starting in start. A guarded move gets
// a before-event callback that lets it through, as the cheapest guard
// looplab has.
func Looplab[S comparable](t *transition.Table[S], start string, guarded Guarded) *fsm.FSM {
	var events fsm.Events
	for _, to := range Names(t) {
		if srcs := edges(t)[to]; len(srcs) > 0 {
			events = append(events, fsm.EventDesc{Name: Event(to), Src: srcs, Dst: to})
		}
	}
	callbacks := fsm.Callbacks{}
	for move := range guarded {
		callbacks["before_"+Event(move[1])] = func(context.Context, *fsm.Event) {}
	}
	return fsm.NewFSM(start, events, callbacks)
}

// Stateless builds t in qmuntal/stateless, starting in start, in the
// given firing mode. A guarded move gets a guard that returns true.
func Stateless[S comparable](t *transition.Table[S], start string, mode stateless.FiringMode, guarded Guarded) *stateless.StateMachine {
	sm := stateless.NewStateMachineWithMode(start, mode)
	pass := func(context.Context, ...any) bool { return true }
	for _, from := range t.States() {
		fromName, _ := t.Name(from)
		cfg := sm.Configure(fromName)
		for _, to := range t.Next(from) {
			toName, _ := t.Name(to)
			if guarded[[2]string{fromName, toName}] {
				cfg.Permit(Event(toName), toName, pass)
			} else {
				cfg.Permit(Event(toName), toName)
			}
		}
	}
	return sm
}

// Lifecycle is execfsm's lifecycle table, with pass-through guards on the
// guarded moves.
func Lifecycle(guarded Guarded) (*transition.Table[state.Status], error) {
	b := teraslice.LifecycleBuilder()
	for move := range guarded {
		from, err := state.Parse(move[0])
		if err != nil {
			return nil, err
		}
		to, err := state.Parse(move[1])
		if err != nil {
			return nil, err
		}
		b.Guard(from, to, func(context.Context, transition.Change[state.Status], transition.View) error { return nil })
	}
	return b.Build()
}

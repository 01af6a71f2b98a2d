package looplabfsm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/execfsm/execfsm/transition"
	"github.com/looplab/fsm"
)

// machine is what this package reads from a looplab/fsm definition: its
// states in the order the events name them, and where each event leads
// from each of its sources.
type machine struct {
	initial string
	states  []string
	dst     map[edgeKey]string // by event and source
	edges   [][2]string        // distinct from → to, self-edges left out
}

type edgeKey struct{ event, src string }

// read checks a definition the way looplab/fsm never does (it accepts
// an empty name, an event without sources, and keeps the last of two
// destinations for one event and source) and returns what it describes.
// Every problem is listed, not just the first.
func read(initial string, events fsm.Events) (*machine, []string) {
	m := &machine{initial: initial, dst: map[edgeKey]string{}}
	var problems []string
	seen := map[string]bool{}
	mention := func(s string) {
		if !seen[s] {
			seen[s] = true
			m.states = append(m.states, s)
		}
	}
	if initial == "" {
		problems = append(problems, "empty initial state")
	}
	mention(initial)
	edgeSeen := map[[2]string]bool{}
	for i, e := range events {
		where := fmt.Sprintf("event %d (%q)", i, e.Name)
		switch {
		case e.Name == "":
			problems = append(problems, fmt.Sprintf("event %d has no name", i))
		case e.Dst == "":
			problems = append(problems, where+" has no destination state")
		case len(e.Src) == 0:
			problems = append(problems, where+" has no source state: looplab/fsm would never fire it")
		}
		for _, src := range e.Src {
			if src == "" {
				problems = append(problems, where+" has an empty source state")
				continue
			}
			if e.Name == "" || e.Dst == "" {
				continue
			}
			k := edgeKey{e.Name, src}
			if prev, ok := m.dst[k]; ok && prev != e.Dst {
				problems = append(problems, fmt.Sprintf("%s from %q leads to both %q and %q: looplab/fsm would keep one of them silently", where, src, prev, e.Dst))
				continue
			}
			m.dst[k] = e.Dst
			mention(src)
			mention(e.Dst)
			// An event whose source is its destination is no move:
			// looplab/fsm runs only its before_ and after_ callbacks and
			// returns NoTransitionError, and a table has no self-edges.
			if src != e.Dst && !edgeSeen[[2]string{src, e.Dst}] {
				edgeSeen[[2]string{src, e.Dst}] = true
				m.edges = append(m.edges, [2]string{src, e.Dst})
			}
		}
	}
	return m, problems
}

// terminal returns the states no event leaves: looplab/fsm has no word
// for them, a table does.
func (m *machine) terminal() []string {
	leaves := map[string]bool{}
	for _, e := range m.edges {
		leaves[e[0]] = true
	}
	var out []string
	for _, s := range m.states {
		if !leaves[s] {
			out = append(out, s)
		}
	}
	return out
}

// Table returns the transition table of a looplab/fsm definition: the
// states its events name, every move an event makes (an event with two
// sources is two moves, two events making one move are one), initial as
// the initial state and the states no event leaves as terminal. Event
// names are not part of a table; [FSM] records them as the reason of
// each move it writes.
//
// The table is validated as every table is, so the definitions a
// looplab/fsm program already has can be checked for what looplab/fsm
// never checks: a state no event reaches, a trap (a state from which no
// terminal state, or in a machine without one the initial state, can be
// reached), an event with no source, one event leading from one state
// to two places. The error is a [*transition.BuildError] listing every
// problem; it matches [transition.ErrInvalidTable]. The table can then
// be drawn ([transition.Table.Mermaid]) and property-tested
// (transitiontest.Check).
func Table(initial string, events fsm.Events) (*transition.Table[string], error) {
	m, problems := read(initial, events)
	b := transition.New(initial).States(m.states...)
	for _, e := range m.edges {
		b.Allow(e[0], e[1])
	}
	b.Terminal(m.terminal()...)
	table, err := b.Build()
	if err != nil {
		var built *transition.BuildError
		if !errors.As(err, &built) {
			return nil, err
		}
		problems = append(problems, built.Problems...)
	}
	if len(problems) > 0 {
		return nil, &transition.BuildError{Problems: slices.Compact(problems)}
	}
	return table, nil
}

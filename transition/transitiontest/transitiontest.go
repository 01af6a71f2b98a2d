// Package transitiontest checks the properties every transition table
// should have, for tables you write yourself. Call [Check] from a test,
// and build your own properties on [Paths], a rapid generator of random
// legal paths through the table; their examples show both.
//
// The checks re-derive everything from the table's public methods, so
// they also guard this module's Build against regressions.
package transitiontest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/execfsm/execfsm/transition"
	"pgregory.net/rapid"
)

// Check runs every standard property of table, each as a subtest when t
// is a *testing.T:
//
//   - Names: every state has a distinct text form that parses back to it.
//   - Reachable: every state can be reached from the initial one.
//   - Finishes: every non-terminal state can reach a terminal state (in a
//     table without terminal states: can get back to the initial one).
//   - TerminalIsFinal: nothing follows a terminal state.
//   - AllowedMatchesNext: Allowed and Next agree on every pair.
//   - MachineFollowsTable: a rapid state-machine test firing random
//     targets at a [transition.Machine], checked after every step against
//     a model of the table (return edges included; a guarded move may be
//     vetoed, never allowed when the table forbids it).
//   - WalksStayInTable: random walks only take allowed moves.
func Check[S comparable](t testing.TB, table *transition.Table[S]) {
	t.Helper()
	run := subtests(t)
	if table == nil {
		t.Fatal("transitiontest.Check: nil table")
	}
	states := table.States()
	run("Names", func(t testing.TB) {
		seen := map[string]S{}
		for _, s := range states {
			name, ok := table.Name(s)
			if !ok {
				t.Fatalf("state %v: Name reports it unknown", s)
			}
			if other, dup := seen[name]; dup {
				t.Fatalf("states %v and %v share the text form %q", other, s, name)
			}
			seen[name] = s
			back, err := table.Parse(name)
			if err != nil || back != s {
				t.Fatalf("Parse(%q) = %v, %v; want %v", name, back, err, s)
			}
		}
	})
	run("Reachable", func(t testing.TB) {
		reached := closure(table, []S{table.Initial()})
		for _, s := range states {
			if !reached[s] {
				t.Errorf("state %v cannot be reached from %v", s, table.Initial())
			}
		}
	})
	run("Finishes", func(t testing.TB) {
		var goals []S
		for _, s := range states {
			if table.IsTerminal(s) {
				goals = append(goals, s)
			}
		}
		for _, s := range states {
			if table.IsTerminal(s) {
				continue
			}
			reached := closure(table, []S{s})
			ok := false
			if len(goals) == 0 {
				ok = reached[table.Initial()]
			}
			for _, g := range goals {
				ok = ok || reached[g]
			}
			if !ok {
				t.Errorf("state %v can never finish", s)
			}
		}
	})
	run("TerminalIsFinal", func(t testing.TB) {
		for _, s := range states {
			if table.IsTerminal(s) && len(table.Next(s)) != 0 {
				t.Errorf("terminal state %v has moves to %v", s, table.Next(s))
			}
		}
	})
	run("AllowedMatchesNext", func(t testing.TB) {
		for _, a := range states {
			next := table.Next(a)
			for _, b := range states {
				if got, want := table.Allowed(a, b), slices.Contains(next, b); got != want {
					t.Errorf("Allowed(%v, %v) = %v but Next(%v) = %v", a, b, got, a, next)
				}
			}
		}
	})
	run("MachineFollowsTable", func(t testing.TB) {
		rapid.Check(t, func(t *rapid.T) { machineFollowsTable(t, table) })
	})
	run("WalksStayInTable", func(t testing.TB) {
		rapid.Check(t, func(t *rapid.T) {
			path := Paths(table, 64).Draw(t, "path")
			if len(path) == 0 || path[0] != table.Initial() {
				t.Fatalf("walk %v does not start at %v", path, table.Initial())
			}
			for k := 1; k < len(path); k++ {
				if !table.Allowed(path[k-1], path[k]) {
					t.Fatalf("walk %v takes %v → %v, which the table does not allow", path, path[k-1], path[k])
				}
			}
		})
	})
}

// subtests runs each property as a subtest of a *testing.T, so every
// failure is named and one property's Fatal does not stop the others; in
// a benchmark or a fuzz target (any other testing.TB) the properties run
// one after another, their failures naming what they found.
func subtests(t testing.TB) func(name string, property func(testing.TB)) {
	if tt, ok := t.(*testing.T); ok {
		return func(name string, property func(testing.TB)) {
			tt.Run(name, func(t *testing.T) { property(t) })
		}
	}
	return func(_ string, property func(testing.TB)) { property(t) }
}

// machineFollowsTable fires random targets and compares the machine with
// a model kept here: the current state and the one it was entered from.
func machineFollowsTable[S comparable](t *rapid.T, table *transition.Table[S]) {
	m, err := transition.NewMachine(table, transition.MachineOptions{})
	if err != nil {
		t.Fatalf("NewMachine: %v", err)
	}
	states := table.States()
	cur := table.Initial()
	var prev S
	hasPrev := false
	t.Repeat(map[string]func(*rapid.T){
		"fire": func(t *rapid.T) {
			to := rapid.SampledFrom(states).Draw(t, "to")
			legal := to == cur || table.Allowed(cur, to) && (!table.IsReturn(cur, to) || hasPrev && prev == to)
			c, err := m.Fire(context.Background(), to, "property test")
			switch {
			case err == nil && !legal:
				t.Fatalf("Fire(%v) from %v succeeded; the table forbids it", to, cur)
			case err != nil && legal && !(table.Guarded(cur, to) && errors.Is(err, transition.ErrGuard)):
				t.Fatalf("Fire(%v) from %v: %v; the table allows it", to, cur, err)
			case err != nil && !legal && !errors.Is(err, transition.ErrNotAllowed):
				t.Fatalf("Fire(%v) from %v: error %v does not match ErrNotAllowed", to, cur, err)
			case err == nil:
				if c.From != cur || c.To != to || c.Changed() != (cur != to) {
					t.Fatalf("Fire(%v) from %v returned change %+v", to, cur, c)
				}
				if to != cur {
					prev, hasPrev, cur = cur, true, to
				}
			}
		},
		"": func(t *rapid.T) {
			if got := m.State(); got != cur {
				t.Fatalf("machine is in %v, model in %v", got, cur)
			}
			if p, ok := m.Previous(); ok != hasPrev || ok && p != prev {
				t.Fatalf("machine remembers %v (%v), model %v (%v)", p, ok, prev, hasPrev)
			}
		},
	})
}

// Paths returns a generator of random legal paths through table: each path
// starts at the initial state and takes up to maxSteps allowed moves,
// honouring return edges, and stops early at a terminal state. Guards are
// not run.
func Paths[S comparable](table *transition.Table[S], maxSteps int) *rapid.Generator[[]S] {
	return rapid.Custom(func(t *rapid.T) []S {
		cur := table.Initial()
		path := []S{cur}
		var prev S
		hasPrev := false
		steps := rapid.IntRange(0, max(maxSteps, 0)).Draw(t, "steps")
		for range steps {
			var options []S
			for _, n := range table.Next(cur) {
				if !table.IsReturn(cur, n) || hasPrev && prev == n {
					options = append(options, n)
				}
			}
			if len(options) == 0 {
				break
			}
			next := rapid.SampledFrom(options).Draw(t, "next")
			prev, hasPrev, cur = cur, true, next
			path = append(path, cur)
		}
		return path
	})
}

// closure returns the states reachable from start along allowed moves.
func closure[S comparable](table *transition.Table[S], start []S) map[S]bool {
	seen := map[S]bool{}
	stack := append([]S(nil), start...)
	for _, s := range start {
		seen[s] = true
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, n := range table.Next(s) {
			if !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
	}
	return seen
}

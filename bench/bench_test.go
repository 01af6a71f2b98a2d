package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/looplab/fsm"
	"github.com/qmuntal/stateless"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var ctx = context.Background()

var toggleMoves = Guarded{{"running", "paused"}: true, {"paused", "running"}: true}

// TestPeersAcceptAndRefuseExactlyTheSameMoves checks, before anything is
// timed, that the three implementations agree on every move between two
// different states of both tables, from every state.
func TestPeersAcceptAndRefuseExactlyTheSameMoves(t *testing.T) {
	lifecycle := teraslice.Lifecycle()
	toggle, err := Toggle()
	require.NoError(t, err)
	parity(t, lifecycle)
	parity(t, toggle)
}

func parity[S comparable](t *testing.T, table *transition.Table[S]) {
	names := Names(table)
	for _, from := range table.States() {
		fromName, _ := table.Name(from)
		lp := Looplab(table, fromName, nil)
		for _, mode := range []stateless.FiringMode{stateless.FiringImmediate, stateless.FiringQueued} {
			sl := Stateless(table, fromName, mode, nil)
			for k, to := range table.States() {
				toName := names[k]
				if to == from {
					continue
				}
				want := table.Allowed(from, to)
				require.Equal(t, want, lp.Can(Event(toName)), "looplab %s → %s", fromName, toName)
				can, err := sl.CanFire(Event(toName))
				require.NoError(t, err)
				require.Equal(t, want, can, "stateless %s → %s", fromName, toName)
			}
		}
	}
}

// TestPeersFollowTheSameRandomWalks fires random legal walks through the
// lifecycle in all three and checks they end up in the same states, and
// that an illegal move is refused by all three.
func TestPeersFollowTheSameRandomWalks(t *testing.T) {
	table := teraslice.Lifecycle()
	rapid.Check(t, func(t *rapid.T) {
		walk := transitiontest.Paths(table, 30).Draw(t, "walk")
		m, err := transition.NewMachine(table, transition.MachineOptions{})
		require.NoError(t, err)
		lp := Looplab(table, "pending", nil)
		sl := Stateless(table, "pending", stateless.FiringImmediate, nil)
		for _, to := range walk[1:] {
			_, err := m.Fire(ctx, to, "walk")
			require.NoError(t, err)
			require.NoError(t, lp.Event(ctx, Event(to.String())))
			require.NoError(t, sl.Fire(Event(to.String())))
			require.Equal(t, to.String(), lp.Current())
			require.Equal(t, to.String(), sl.MustState())
		}
		last := walk[len(walk)-1]
		if last.IsRunning() && last != state.Relocating {
			_, err := m.Fire(ctx, state.Pending, "back to init")
			require.ErrorIs(t, err, transition.ErrNotAllowed)
			require.Error(t, lp.Event(ctx, Event("pending")))
			require.Error(t, sl.Fire(Event("pending")))
		}
	})
}

// targets alternate a running execution between paused and running.
var targets = [2]state.Status{state.Paused, state.Running}

func machine(b *testing.B, table *transition.Table[state.Status]) *transition.Machine[state.Status] {
	m, err := transition.NewMachineAt(table, state.Running, transition.MachineOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkFire is a valid transition on the lifecycle (running ⇄ paused)
// and on the toggle, in each library.
//
// "bare-cas" is the floor: one load and one uncontended compare-and-swap
// of an atomic word, which is all a Machine's state is. Its speed-up
// column says how far execfsm is from it.
func BenchmarkFire(b *testing.B) {
	lifecycle := teraslice.Lifecycle()
	moves := [2]state.Status{state.Paused, state.Running}
	fireInEach(b, "lifecycle", lifecycle, state.Running, moves, func(b *testing.B) {
		// Concrete, not inside the generic fireInEach: a caller of Fire
		// knows its state type, and the generic call costs 2-3 ns more.
		m, err := transition.NewMachineAt(lifecycle, state.Running, transition.MachineOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := range b.N {
			if _, err := m.Fire(ctx, moves[i&1], "toggle"); err != nil {
				b.Fatal(err)
			}
		}
	})
	toggle, err := Toggle()
	if err != nil {
		b.Fatal(err)
	}
	onOff := [2]string{"on", "off"}
	fireInEach(b, "toggle", toggle, "off", onOff, func(b *testing.B) {
		m, err := transition.NewMachineAt(toggle, "off", transition.MachineOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := range b.N {
			if _, err := m.Fire(ctx, onOff[i&1], "toggle"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fireInEach benchmarks, in every library, a machine on table that starts
// in start and alternates between the two states of moves; execfsm's is
// the loop given.
func fireInEach[S comparable](b *testing.B, group string, table *transition.Table[S], start S, moves [2]S, execfsm func(*testing.B)) {
	startName, _ := table.Name(start)
	var events [2]string
	for k, s := range moves {
		name, _ := table.Name(s)
		events[k] = Event(name)
	}
	b.Run(group+"/execfsm", execfsm)
	b.Run(group+"/bare-cas", func(b *testing.B) {
		var word atomic.Uint64
		b.ReportAllocs()
		for range b.N {
			w := word.Load()
			if !word.CompareAndSwap(w, w+1) {
				b.Fatal("contended")
			}
		}
	})
	b.Run(group+"/looplab", func(b *testing.B) {
		f := Looplab(table, startName, nil)
		b.ReportAllocs()
		for i := range b.N {
			if err := f.Event(ctx, events[i&1]); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []struct {
		name string
		mode stateless.FiringMode
	}{{"stateless-immediate", stateless.FiringImmediate}, {"stateless-queued", stateless.FiringQueued}} {
		b.Run(group+"/"+mode.name, func(b *testing.B) {
			sm := Stateless(table, startName, mode.mode, nil)
			b.ReportAllocs()
			for i := range b.N {
				if err := sm.Fire(events[i&1]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReject is a move the table refuses: running → pending.
func BenchmarkReject(b *testing.B) {
	lifecycle := teraslice.Lifecycle()
	b.Run("execfsm", func(b *testing.B) {
		m := machine(b, lifecycle)
		b.ReportAllocs()
		for range b.N {
			if _, err := m.Fire(ctx, state.Pending, "back"); err == nil {
				b.Fatal("allowed")
			}
		}
	})
	b.Run("looplab", func(b *testing.B) {
		f := Looplab(lifecycle, "running", nil)
		b.ReportAllocs()
		for range b.N {
			if err := f.Event(ctx, Event("pending")); err == nil {
				b.Fatal("allowed")
			}
		}
	})
	b.Run("stateless-immediate", func(b *testing.B) {
		sm := Stateless(lifecycle, "running", stateless.FiringImmediate, nil)
		b.ReportAllocs()
		for range b.N {
			if err := sm.Fire(Event("pending")); err == nil {
				b.Fatal("allowed")
			}
		}
	})
}

// BenchmarkGuarded is running ⇄ paused with a guard (that agrees) on both
// moves.
func BenchmarkGuarded(b *testing.B) {
	table, err := Lifecycle(toggleMoves)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("execfsm", func(b *testing.B) {
		m := machine(b, table)
		b.ReportAllocs()
		for i := range b.N {
			if _, err := m.Fire(ctx, targets[i&1], "toggle"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("looplab", func(b *testing.B) {
		f := Looplab(table, "running", toggleMoves)
		events := [2]string{Event("paused"), Event("running")}
		b.ReportAllocs()
		for i := range b.N {
			if err := f.Event(ctx, events[i&1]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stateless-immediate", func(b *testing.B) {
		sm := Stateless(table, "running", stateless.FiringImmediate, toggleMoves)
		events := [2]string{Event("paused"), Event("running")}
		b.ReportAllocs()
		for i := range b.N {
			if err := sm.Fire(events[i&1]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var sink bool

// BenchmarkCan asks "can I go there" (running → relocating) without moving.
func BenchmarkCan(b *testing.B) {
	lifecycle := teraslice.Lifecycle()
	b.Run("execfsm", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			sink = lifecycle.Allowed(state.Running, state.Relocating)
		}
	})
	b.Run("looplab", func(b *testing.B) {
		f := Looplab(lifecycle, "running", nil)
		b.ReportAllocs()
		for range b.N {
			sink = f.Can(Event("relocating"))
		}
	})
	b.Run("stateless-immediate", func(b *testing.B) {
		sm := Stateless(lifecycle, "running", stateless.FiringImmediate, nil)
		b.ReportAllocs()
		for range b.N {
			sink, _ = sm.CanFire(Event("relocating"))
		}
	})
	b.Run("bare-array", func(b *testing.B) {
		var matrix [state.NumStatuses + 1][state.NumStatuses + 1]bool
		for from := range state.All.All() {
			for to := range state.All.All() {
				matrix[from][to] = lifecycle.Allowed(from, to)
			}
		}
		from := state.Running
		b.ReportAllocs()
		for range b.N {
			sink = matrix[from][state.Relocating]
		}
	})
}

// BenchmarkParallel is many goroutines firing on one shared machine; a
// refused or idempotent move counts like any other attempt.
func BenchmarkParallel(b *testing.B) {
	lifecycle := teraslice.Lifecycle()
	b.Run("execfsm", func(b *testing.B) {
		m := machine(b, lifecycle)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_, _ = m.Fire(ctx, targets[i&1], "toggle")
			}
		})
	})
	b.Run("looplab", func(b *testing.B) {
		f := Looplab(lifecycle, "running", nil)
		events := [2]string{Event("paused"), Event("running")}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_ = f.Event(ctx, events[i&1])
			}
		})
	})
	b.Run("stateless-immediate", func(b *testing.B) {
		sm := Stateless(lifecycle, "running", stateless.FiringImmediate, nil)
		events := [2]string{Event("paused"), Event("running")}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_ = sm.Fire(events[i&1])
			}
		})
	})
}

// BenchmarkBuild builds the lifecycle table.
func BenchmarkBuild(b *testing.B) {
	lifecycle := teraslice.Lifecycle()
	b.Run("execfsm", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := teraslice.LifecycleBuilder().Build(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("looplab", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = Looplab(lifecycle, "pending", nil)
		}
	})
	b.Run("stateless-immediate", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = Stateless(lifecycle, "pending", stateless.FiringImmediate, nil)
		}
	})
}

// BenchmarkDiagram exports the lifecycle as a diagram: Mermaid for
// execfsm and looplab, Graphviz for stateless (its only format).
func BenchmarkDiagram(b *testing.B) {
	lifecycle := teraslice.Lifecycle()
	b.Run("execfsm", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = lifecycle.Mermaid()
		}
	})
	b.Run("looplab", func(b *testing.B) {
		f := Looplab(lifecycle, "pending", nil)
		b.ReportAllocs()
		for range b.N {
			if _, err := fsm.VisualizeForMermaidWithGraphType(f, fsm.StateDiagram); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stateless-immediate", func(b *testing.B) {
		sm := Stateless(lifecycle, "pending", stateless.FiringImmediate, nil)
		b.ReportAllocs()
		for range b.N {
			_ = sm.ToGraph()
		}
	})
}

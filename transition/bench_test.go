package transition_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// The benchmarks move an execution between running and paused on the
// canonical lifecycle; bench/ runs the same moves on peer libraries.

func benchMachine(b *testing.B, opts transition.MachineOptions, observers ...transition.Observers[state.Status]) *transition.Machine[state.Status] {
	m, err := transition.NewMachineAt(teraslice.Lifecycle(), state.Running, opts, observers...)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkMachineFire(b *testing.B) {
	m := benchMachine(b, transition.MachineOptions{})
	ctx := context.Background()
	targets := [2]state.Status{state.Paused, state.Running}
	b.ReportAllocs()
	for i := range b.N {
		if _, err := m.Fire(ctx, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMachineFireRejected(b *testing.B) {
	m := benchMachine(b, transition.MachineOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		if _, err := m.Fire(ctx, state.Pending, "back to init"); err == nil {
			b.Fatal("allowed")
		}
	}
}

func BenchmarkMachineFireGuarded(b *testing.B) {
	table, err := teraslice.LifecycleBuilder().
		Guard(state.Running, state.Paused, func(context.Context, transition.Change[state.Status], transition.View) error { return nil }).
		Guard(state.Paused, state.Running, func(context.Context, transition.Change[state.Status], transition.View) error { return nil }).
		Build()
	if err != nil {
		b.Fatal(err)
	}
	m, err := transition.NewMachineAt(table, state.Running, transition.MachineOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	targets := [2]state.Status{state.Paused, state.Running}
	b.ReportAllocs()
	for i := range b.N {
		if _, err := m.Fire(ctx, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMachineFireObserved(b *testing.B) {
	n := 0
	m := benchMachine(b, transition.MachineOptions{}, transition.Observers[state.Status]{OnChange: []func(transition.Change[state.Status]){func(transition.Change[state.Status]) { n++ }}})
	ctx := context.Background()
	targets := [2]state.Status{state.Paused, state.Running}
	b.ReportAllocs()
	for i := range b.N {
		if _, err := m.Fire(ctx, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMachineFireParallel: "own" gives every goroutine its machine
// (how executions scale), "shared" makes them all fight over one.
func BenchmarkMachineFireParallel(b *testing.B) {
	ctx := context.Background()
	targets := [2]state.Status{state.Paused, state.Running}
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			m := benchMachine(b, transition.MachineOptions{})
			for i := 0; pb.Next(); i++ {
				if _, err := m.Fire(ctx, targets[i&1], "toggle"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("shared", func(b *testing.B) {
		m := benchMachine(b, transition.MachineOptions{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				if _, err := m.Fire(ctx, targets[i&1], "toggle"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

var sink bool

func BenchmarkAllowed(b *testing.B) {
	table := teraslice.Lifecycle()
	froms := [2]state.Status{state.Running, state.Stopping}
	b.ReportAllocs()
	for i := range b.N {
		sink = table.Allowed(froms[i&1], state.Relocating)
	}
}

// BenchmarkBareArrayLookup is the floor Allowed is measured against: a
// precomputed [14][14]bool indexed directly.
func BenchmarkBareArrayLookup(b *testing.B) {
	table := teraslice.Lifecycle()
	var matrix [state.NumStatuses + 1][state.NumStatuses + 1]bool
	for from := range state.All.All() {
		for to := range state.All.All() {
			matrix[from][to] = table.Allowed(from, to)
		}
	}
	froms := [2]state.Status{state.Running, state.Stopping}
	b.ReportAllocs()
	for i := range b.N {
		sink = matrix[froms[i&1]][state.Relocating]
	}
}

func BenchmarkBuildLifecycle(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := teraslice.LifecycleBuilder().Build(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMermaid(b *testing.B) {
	table := teraslice.Lifecycle()
	b.ReportAllocs()
	for range b.N {
		_ = table.Mermaid()
	}
}

func BenchmarkPersistedFireMemoryStore(b *testing.B) {
	store := storage.NewMemory()
	p, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Create(ctx, transition.To(state.Running)); err != nil {
		b.Fatal(err)
	}
	targets := [2]state.Status{state.Paused, state.Running}
	b.ReportAllocs()
	for i := range b.N {
		if _, err := p.Fire(ctx, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}
}

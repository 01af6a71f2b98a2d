package teraslice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

func ExampleLifecycle() {
	table := teraslice.Lifecycle()
	fmt.Println(table.Allowed(state.Running, state.Relocating))
	fmt.Println(table.Allowed(state.Stopping, state.Relocating)) // SIGTERM while stopping means shut down
	fmt.Println(table.Next(state.Relocating))
	// Output:
	// true
	// false
	// [initializing running recovering failing paused stopping failed terminated]
}

// The README's quick start: a cluster master schedules an execution, one
// controller runs it and is relocated, the next takes over and resumes.
func Example_relocation() {
	ctx := context.Background()
	table := teraslice.Lifecycle()
	store := storage.NewMemory()
	master, _ := transition.NewPersisted(table, store, "ex-42", transition.PersistedOptions{Actor: "master"})
	_, _ = master.Create(ctx, transition.To(state.Pending).Because("submitted"))
	_, _ = master.Fire(ctx, state.Scheduling, "allocator dequeued it")
	_, _ = master.Fire(ctx, state.Initializing, "controller placed")

	controller := func(pod string) *transition.Persisted[state.Status] {
		exec, _ := transition.NewPersisted(table, store, "ex-42", transition.PersistedOptions{Actor: pod})
		_, _, _ = exec.Acquire(ctx, storage.Lease{Holder: pod, TTL: 15 * time.Second}, nil)
		return exec
	}
	podA := controller("pod-a") // epoch 1
	_, _ = podA.Fire(ctx, state.Running, "slicer ready")
	_, _ = podA.Fire(ctx, state.Relocating, "SIGTERM from the platform: relocate")
	_ = podA.Ownership().Release(ctx) // so the next pod need not wait for the lease

	podB := controller("pod-b") // epoch 2 fences pod-a
	_, rec, _ := podB.Load(ctx)
	back, _ := table.Parse(rec.Previous) // relocating remembers: running
	_, _ = podB.Fire(ctx, back, "resumed")

	_, err := podA.Fire(ctx, state.Failed, "old pod still alive")
	fmt.Println(errors.Is(err, storage.ErrFenced))
	_, err = podB.Fire(ctx, state.Pending, "rewind")
	fmt.Println(errors.Is(err, transition.ErrNotAllowed))
	cur, _, _ := master.Load(ctx)
	fmt.Println(cur)
	// Output:
	// true
	// true
	// running
}

// A controller refuses to start running before its workers are there:
// the canonical lifecycle with one guard of its own.
func ExampleLifecycleBuilder() {
	workers := 0
	workersConnected := func(context.Context, transition.Change[state.Status], transition.View) error {
		if workers == 0 {
			return errors.New("no worker connected yet")
		}
		return nil
	}
	table, err := teraslice.LifecycleBuilder().
		Guard(state.Initializing, state.Running, workersConnected).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := transition.NewMachineAt(table, state.Initializing, transition.MachineOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = m.Fire(context.Background(), state.Running, "slicer ready")
	fmt.Println(err != nil, m.State())
	workers = 3
	_, err = m.Fire(context.Background(), state.Running, "slicer ready")
	fmt.Println(err, m.State())
	// Output:
	// true initializing
	// <nil> running
}

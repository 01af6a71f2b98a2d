package looplabfsm_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/looplabfsm"
	"github.com/execfsm/execfsm/storage"
	"github.com/looplab/fsm"
)

// A looplab/fsm door, persisted: every event is in the store before the
// machine moves, a restarted process gets the door back where it was,
// and the process it replaced can no longer move it.
func Example() {
	ctx := context.Background()
	events := fsm.Events{
		{Name: "open", Src: []string{"closed"}, Dst: "open"},
		{Name: "close", Src: []string{"open"}, Dst: "closed"},
		{Name: "lock", Src: []string{"closed"}, Dst: "locked"},
		{Name: "unlock", Src: []string{"locked"}, Dst: "closed"},
	}
	callbacks := fsm.Callbacks{
		"enter_state": func(_ context.Context, e *fsm.Event) { fmt.Printf("  %s: %s → %s\n", e.Event, e.Src, e.Dst) },
	}
	store := storage.NewMemory() // a boltstore, etcdstore or kube store in production

	start := func(pod string) *looplabfsm.FSM {
		door, err := looplabfsm.New(ctx, store, "door-1", "closed", pod, looplabfsm.Options{
			Events: events, Callbacks: callbacks,
			Lease: storage.Lease{Holder: pod, TTL: 15 * time.Second},
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s starts the door %s\n", pod, door.Current())
		return door
	}

	first := start("pod-a")
	_ = first.Event(ctx, "open")
	_ = first.Event(ctx, "close")
	_ = first.Event(ctx, "lock")
	// pod-a is relocated: its ownership ends, pod-b takes over.
	_ = first.Persisted().Ownership().Release(ctx)
	second := start("pod-b")
	_ = second.Event(ctx, "unlock")

	err := first.Event(ctx, "unlock")
	fmt.Println("pod-a fenced:", errors.Is(err, storage.ErrFenced), "and still thinks the door is", first.Current())

	rec, _ := store.Get(ctx, "door-1")
	for _, e := range rec.History.All() {
		owner := e.Owner
		if owner == "" {
			owner = "nobody"
		}
		fmt.Printf("%-8s %-7s → %-7s by %s\n", e.Reason, e.From, e.To, owner)
	}
	_ = second.Persisted().Ownership().Release(ctx)
	// Output:
	// pod-a starts the door closed
	//   open: closed → open
	//   close: open → closed
	//   lock: closed → locked
	// pod-b starts the door locked
	//   unlock: locked → closed
	// pod-a fenced: true and still thinks the door is locked
	// created          → closed  by nobody
	// acquired closed  → closed  by pod-a
	// open     closed  → open    by pod-a
	// close    open    → closed  by pod-a
	// lock     closed  → locked  by pod-a
	// acquired locked  → locked  by pod-b
	// unlock   locked  → closed  by pod-b
}

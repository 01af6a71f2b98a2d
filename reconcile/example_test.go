package reconcile_test

import (
	"context"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/reconcile"
)

// A manager restarted after a crash adopts what the world has, learns
// what it lost, and reconciles everything.
func ExampleLoop() {
	world := []reconcile.Item[string]{
		{Key: "sim-1", Identity: reconcile.Identity{Labels: map[string]string{"uuid": "sim-1", "manager": "mgr-a"}, Annotations: map[string]string{"realm": "lab"}}},
	}
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		World: func(context.Context) ([]reconcile.Item[string], error) { return world, nil },
		Known: func(context.Context) ([]string, error) { return []string{"sim-1", "sim-2"}, nil },
		Adopter: reconcile.AdopterFunc[string](func(_ context.Context, it reconcile.Item[string]) error {
			fmt.Println("adopt", it.Identity.Labels["uuid"], "of", it.Identity.Labels["manager"])
			return nil
		}),
		AdoptionObserver: reconcile.AdoptionObserverFunc[string](func(r reconcile.AdoptionReport[string]) { fmt.Println("gone", r.Gone) }),
		Reconciler: reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	// Run returns once its context is done: here, when the loop is idle
	// (or, should something be wrong, after a minute at most).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	if err := loop.Idle(ctx); err != nil {
		fmt.Println("not idle:", err)
	}
	cancel()
	<-done
	fmt.Println("reconciled", loop.Stats().Reconciles)
	// Output:
	// adopt sim-1 of mgr-a
	// gone [sim-2]
	// reconciled 2
}

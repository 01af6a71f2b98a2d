package run_test

import (
	"context"
	"fmt"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// A whole execution controller on a Kubernetes Job: it takes the
// execution over, decides, runs the work until it is done (or a SIGTERM,
// a stop or a lost lease cancels it), writes the end it earned and exits
// with the code the Job needs (here 0: completed; 143 after a relocation).
func ExampleRun() {
	ctx := context.Background()
	store := storage.NewMemory()
	master, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-42", transition.PersistedOptions{Actor: "master"})
	if _, err := master.Create(ctx, transition.To(state.Initializing).Because("placed")); err != nil {
		fmt.Println(err)
		return
	}

	code, err := run.Run(ctx, run.Config[state.Status]{
		Roles: teraslice.Roles(), Store: store, ID: "ex-42", Table: "teraslice", Holder: "pod-a",
		Platform: recovery.KubernetesJob, Resumable: true, Failovers: teraslice.Failovers,
		Work: func(ctx context.Context, _ *transition.Persisted[state.Status], _ state.Status) recovery.Ending {
			return recovery.Ending{Finished: ctx.Err() == nil} // the slices, until done or cancelled
		},
	})
	rec, _ := store.Get(ctx, "ex-42")
	fmt.Println(code, err, rec.Status)
	// Output: 0 <nil> completed
}

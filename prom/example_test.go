package prom_test

import (
	"context"
	"fmt"
	"os"

	"github.com/execfsm/execfsm/prom"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// A controller counts the moves of its executions. In a process it would
// serve reg with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func Example() {
	ctx := context.Background()
	m := prom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	moves, err := prom.NewTransitions(m, teraslice.Lifecycle())
	if err != nil {
		fmt.Println(err)
		return
	}
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), storage.NewMemory(), "ex-1", transition.PersistedOptions{}, moves.Observers())
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := exec.Create(ctx, transition.To(state.Pending)); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = exec.Fire(ctx, state.Scheduling, "placed")
	_, _ = exec.Fire(ctx, state.Running, "skipping initialization") // refused by the table

	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		if f.GetName() == "execfsm_transitions_total" {
			_, _ = expfmt.MetricFamilyToText(os.Stdout, f)
		}
	}
	// Output:
	// # HELP execfsm_transitions_total Moves of executions by the state they left, the state they asked for and their result (done, not_allowed, guard, conflict, fenced, error).
	// # TYPE execfsm_transitions_total counter
	// execfsm_transitions_total{from="",result="done",to="pending"} 1
	// execfsm_transitions_total{from="pending",result="done",to="scheduling"} 1
	// execfsm_transitions_total{from="scheduling",result="not_allowed",to="running"} 1
}

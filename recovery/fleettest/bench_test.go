package fleettest_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/execfsm/execfsm/state"
)

// BenchmarkExplore explores the built-in lifecycle exhaustively at the
// bounds BENCHMARKS.md reports, each as one run (-benchtime=1x): the
// distinct states and steps are reported beside the time.
func BenchmarkExplore(b *testing.B) {
	wider := lifecycle()
	wider.Master.Abandons, wider.Master.Reruns = true, 1
	for _, c := range []struct {
		name  string
		fleet fleettest.Fleet[state.Status]
		bound fleettest.Bound
	}{
		{"pods=2,crashes=1,drains=1,every-state", lifecycle(), everyState},
		{"pods=2,crashes=1,drains=1,every-state,no-races", lifecycle(), fleettest.Bound{Depth: 40, Pods: 2, Crashes: 1, Drains: 1, NoRaces: true}},
		{"pods=2,crashes=1,drains=1,abandons,reruns=1,depth=10", wider, fleettest.Bound{Depth: 10, Pods: 2, Crashes: 1, Drains: 1}},
		{"pods=3,crashes=2,drains=2,depth=12", lifecycle(), fleettest.Bound{Depth: 12, Pods: 3, Crashes: 2, Drains: 2}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var r fleettest.Report
			for b.Loop() {
				var err error
				if r, err = c.fleet.Explore(context.Background(), c.bound); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(r.States), "states")
			b.ReportMetric(float64(r.Steps), "steps")
			b.ReportMetric(float64(r.Depth), "depth")
		})
	}
}

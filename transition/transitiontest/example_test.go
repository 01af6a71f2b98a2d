package transitiontest_test

import (
	"fmt"
	"testing"

	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"pgregory.net/rapid"
)

// A user's simulator table, checked with every standard property.
func ExampleCheck() {
	simulators, err := transition.New("idle").
		Allow("idle", "starting", "gone").
		Allow("starting", "running", "error").
		Allow("running", "paused", "stopping", "error").
		Allow("paused", "running", "stopping").
		Allow("stopping", "idle", "gone").
		Allow("error", "idle", "gone").
		Terminal("gone").
		Build()
	if err != nil {
		panic(err)
	}
	// In a test function: transitiontest.Check(t, simulators)
	fmt.Println(simulators.Len(), "states")
	// Output: 7 states
}

// Paths draws random legal paths; a property over them is a few lines.
// Here: a relocated execution that returns comes back to the status it
// left, never to another one.
func ExamplePaths() {
	table := teraslice.Lifecycle()
	property := func(t *rapid.T) {
		path := transitiontest.Paths(table, 40).Draw(t, "path")
		for k := 2; k < len(path); k++ {
			if table.IsReturn(path[k-1], path[k]) && path[k] != path[k-2] {
				t.Fatalf("relocated from %s, came back %s", path[k-2], path[k])
			}
		}
	}
	_ = property // in a test: rapid.Check(t, property)

	// Generators also produce examples outside tests.
	path := transitiontest.Paths(table, 6).Example(1)
	fmt.Println(path[0], len(path) >= 1)
	// Output: pending true
}

func TestWalkPropertyHolds(t *testing.T) {
	table := teraslice.Lifecycle()
	rapid.Check(t, func(t *rapid.T) {
		path := transitiontest.Paths(table, 40).Draw(t, "path")
		for k := 2; k < len(path); k++ {
			if table.IsReturn(path[k-1], path[k]) && path[k] != path[k-2] {
				t.Fatalf("relocated from %s, came back %s", path[k-2], path[k])
			}
		}
	})
}

package state_test

import (
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/state"
)

func ExampleParse() {
	s, err := state.Parse("relocating")
	fmt.Println(s, err, s.IsRunning())

	_, err = state.Parse("Running")
	fmt.Println(errors.Is(err, state.ErrUnknownStatus))
	// Output:
	// relocating <nil> true
	// true
}

func ExampleSet() {
	alive := state.InitStatuses.Union(state.RunningStatuses)
	fmt.Println(alive.Has(state.Relocating), alive.Len())
	fmt.Println(state.TerminalStatuses.Minus(state.FailedStatuses))
	// Output:
	// true 9
	// {completed, stopped}
}

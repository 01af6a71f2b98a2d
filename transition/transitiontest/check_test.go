package transitiontest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/stretchr/testify/require"
)

func TestCheckPassesAUserTableWithReturnEdges(t *testing.T) {
	table, err := transition.New("idle").
		Allow("idle", "running").
		Allow("running", "paused", "moving", "gone").
		Allow("paused", "running", "moving", "gone").
		Return("moving", "running", "paused").
		Allow("moving", "gone").
		Terminal("gone").
		Build()
	require.NoError(t, err)
	transitiontest.Check(t, table)
}

// Guards may veto; the model accepts a veto on a guarded move and nothing
// else.
func TestCheckPassesATableWhoseGuardsVeto(t *testing.T) {
	flip := false
	table, err := transition.New(0).
		Allow(0, 1).Allow(1, 0, 2).Terminal(2).
		Guard(0, 1, func(context.Context, transition.Change[int], transition.View) error {
			flip = !flip
			if flip {
				return errors.New("not now")
			}
			return nil
		}).
		Build()
	require.NoError(t, err)
	transitiontest.Check(t, table)
}

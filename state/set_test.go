package state_test

import (
	"slices"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestNamedSetsPartitionEveryStatus(t *testing.T) {
	require.Equal(t, state.NumStatuses, state.All.Len())
	require.Equal(t, state.All, state.InitStatuses.Union(state.RunningStatuses).Union(state.TerminalStatuses))
	require.Zero(t, state.InitStatuses.Intersect(state.RunningStatuses))
	require.Zero(t, state.InitStatuses.Intersect(state.TerminalStatuses))
	require.Zero(t, state.RunningStatuses.Intersect(state.TerminalStatuses))
	require.Equal(t, state.FailedStatuses, state.FailedStatuses.Intersect(state.TerminalStatuses))
}

func TestNamedSetsHoldTerasliceListsPlusRelocating(t *testing.T) {
	require.Equal(t, "{pending, scheduling, initializing}", state.InitStatuses.String())
	require.Equal(t, "{running, recovering, relocating, failing, paused, stopping}", state.RunningStatuses.String())
	require.Equal(t, "{completed, stopped, rejected, failed, terminated}", state.TerminalStatuses.String())
	require.Equal(t, "{rejected, failed, terminated}", state.FailedStatuses.String())
	require.True(t, state.Relocating.IsRunning(), "a relocating execution is alive, only moving")
	require.False(t, state.Relocating.IsTerminal())
	require.True(t, state.Stopped.IsTerminal())
	require.False(t, state.Stopped.IsFailed(), "stopped was asked for")
	require.True(t, state.Scheduling.IsInit())
}

func TestSetIgnoresInvalidStatuses(t *testing.T) {
	s := state.Of(0, 200, state.Running)
	require.Equal(t, 1, s.Len())
	require.False(t, s.Has(0))
	require.False(t, state.Set(^uint32(0)).Has(state.Status(31)))
	require.Equal(t, state.NumStatuses, state.Set(^uint32(0)).Len())
}

func TestSetAllStopsWhenAsked(t *testing.T) {
	var got []state.Status
	for s := range state.All.All() {
		got = append(got, s)
		if s == state.Running {
			break
		}
	}
	require.Equal(t, []state.Status{state.Pending, state.Scheduling, state.Initializing, state.Running}, got)
}

// The set operations agree with a map model for any sets of statuses.
func TestSetBehavesLikeAMapOfStatuses(t *testing.T) {
	gen := rapid.SliceOf(rapid.Custom(func(t *rapid.T) state.Status {
		return state.Status(rapid.IntRange(0, 20).Draw(t, "status"))
	}))
	rapid.Check(t, func(t *rapid.T) {
		xs, ys := gen.Draw(t, "xs"), gen.Draw(t, "ys")
		a, b := state.Of(xs...), state.Of(ys...)
		inA := func(s state.Status) bool { return s.Valid() && slices.Contains(xs, s) }
		inB := func(s state.Status) bool { return s.Valid() && slices.Contains(ys, s) }
		var members []state.Status
		for s := state.Status(0); s < 32; s++ {
			require.Equal(t, inA(s), a.Has(s))
			require.Equal(t, inA(s) || inB(s), a.Union(b).Has(s))
			require.Equal(t, inA(s) && !inB(s), a.Minus(b).Has(s))
			require.Equal(t, inA(s) && inB(s), a.Intersect(b).Has(s))
			if inA(s) {
				members = append(members, s)
			}
		}
		require.Equal(t, len(members), a.Len())
		require.Equal(t, members, slices.Collect(a.All()), "All yields members in declaration order")
	})
}

package teraslice_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the lifecycle diagram of docs/lifecycle.md from the table")

// spec is the lifecycle written out a second time, as the behaviour the
// tests demand: every status and the statuses it may move to. "<" marks a
// return edge (only back to the status relocating was entered from).
var spec = map[state.Status]string{
	state.Pending:      "scheduling rejected stopping",
	state.Scheduling:   "initializing failed rejected stopping",
	state.Initializing: "running recovering failed stopping terminated",
	state.Running:      "failing paused stopping relocating completed failed terminated",
	state.Recovering:   "running failing paused stopping relocating completed failed terminated",
	state.Failing:      "running recovering paused stopping relocating completed failed terminated",
	state.Paused:       "running stopping relocating completed failed terminated",
	state.Stopping:     "stopped completed failed terminated",
	state.Relocating:   "<running <recovering <failing <paused initializing failed stopping terminated",
	state.Completed:    "",
	state.Stopped:      "",
	state.Rejected:     "",
	state.Failed:       "",
	state.Terminated:   "",
}

// TestLifecycleMatrix checks all 14×14 pairs against the spec.
func TestLifecycleMatrix(t *testing.T) {
	table := teraslice.Lifecycle()
	require.Len(t, spec, state.NumStatuses)
	for from := range state.All.All() {
		want := map[state.Status]string{}
		for _, word := range strings.Fields(spec[from]) {
			kind := "edge"
			if strings.HasPrefix(word, "<") {
				kind, word = "return", word[1:]
			}
			to, err := state.Parse(word)
			require.NoError(t, err)
			want[to] = kind
		}
		for to := range state.All.All() {
			kind, ok := want[to]
			require.Equal(t, ok, table.Allowed(from, to), "%s → %s", from, to)
			require.Equal(t, kind == "return", table.IsReturn(from, to), "%s → %s return edge", from, to)
		}
	}
}

func TestLifecycleHasNoWayOutOfATerminalStatus(t *testing.T) {
	table := teraslice.Lifecycle()
	for s := range state.TerminalStatuses.All() {
		require.True(t, table.IsTerminal(s))
		require.Empty(t, table.Next(s), "%s", s)
	}
	for s := range state.All.Minus(state.TerminalStatuses).All() {
		require.False(t, table.IsTerminal(s), "%s", s)
	}
}

func TestLifecycleNeverGoesFromRunningBackToInitButForARelocatedRestart(t *testing.T) {
	table := teraslice.Lifecycle()
	for from := range state.RunningStatuses.All() {
		for to := range state.InitStatuses.All() {
			want := from == state.Relocating && to == state.Initializing
			require.Equal(t, want, table.Allowed(from, to), "%s → %s", from, to)
		}
	}
}

func TestRelocatingIsReachableFromEveryRunningStatusButStopping(t *testing.T) {
	table := teraslice.Lifecycle()
	for from := range state.RunningStatuses.Minus(state.Of(state.Relocating)).All() {
		require.Equal(t, from != state.Stopping, table.Allowed(from, state.Relocating), "%s", from)
	}
	for from := range state.InitStatuses.Union(state.TerminalStatuses).All() {
		require.False(t, table.Allowed(from, state.Relocating), "%s", from)
	}
}

func TestLifecycleRelocatedExecutionReturnsToTheStatusItLeft(t *testing.T) {
	ctx := context.Background()
	for _, left := range []state.Status{state.Running, state.Recovering, state.Failing, state.Paused} {
		m, err := transition.NewMachineAt(teraslice.Lifecycle(), left, transition.MachineOptions{})
		require.NoError(t, err)
		_, err = m.Fire(ctx, state.Relocating, "node drained")
		require.NoError(t, err)
		for _, other := range []state.Status{state.Running, state.Recovering, state.Failing, state.Paused} {
			if other == left {
				continue
			}
			_, err := m.Fire(ctx, other, "resume")
			require.ErrorIs(t, err, transition.ErrNotAllowed, "relocated from %s, returning to %s", left, other)
			require.Contains(t, err.Error(), "returns only to "+left.String())
		}
		c, err := m.Fire(ctx, left, "resumed after relocation")
		require.NoError(t, err)
		require.Equal(t, state.Relocating, c.From)
		require.Equal(t, left, m.State())
	}
}

func TestLifecycleWritingTheCurrentStatusIsAnIdempotentSuccess(t *testing.T) {
	ctx := context.Background()
	for s := range state.All.All() {
		m, err := transition.NewMachineAt(teraslice.Lifecycle(), s, transition.MachineOptions{})
		require.NoError(t, err)
		c, err := m.Fire(ctx, s, "again")
		require.NoError(t, err, "%s", s)
		require.False(t, c.Changed())
		require.Equal(t, s, m.State())
	}
}

func TestLifecycleProperties(t *testing.T) {
	transitiontest.Check(t, teraslice.Lifecycle())
}

func TestLifecycleBuilderTakesGuards(t *testing.T) {
	noWorkers := func(context.Context, transition.Change[state.Status], transition.View) error {
		return context.DeadlineExceeded
	}
	table, err := teraslice.LifecycleBuilder().Guard(state.Initializing, state.Running, noWorkers).Build()
	require.NoError(t, err)
	require.True(t, table.Guarded(state.Initializing, state.Running))
	require.False(t, teraslice.Lifecycle().Guarded(state.Initializing, state.Running), "the shared table is untouched")
}

const (
	diagramBegin = "<!-- lifecycle diagram: generated by `go test ./teraslice -update-docs`; do not edit -->\n```mermaid\n"
	diagramEnd   = "```\n<!-- end lifecycle diagram -->"
)

// TestLifecycleDiagramIsCurrent fails when the diagram of
// docs/lifecycle.md is not the one the table produces; run with
// -update-docs to rewrite it.
func TestLifecycleDiagramIsCurrent(t *testing.T) {
	const path = "../docs/lifecycle.md"
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	begin := strings.Index(doc, diagramBegin)
	end := strings.Index(doc, diagramEnd)
	require.True(t, begin >= 0 && end > begin, "docs/lifecycle.md lacks the lifecycle diagram markers")
	current := doc[begin+len(diagramBegin) : end]
	want := teraslice.Lifecycle().Mermaid()
	if *updateDocs {
		doc = doc[:begin+len(diagramBegin)] + want + doc[end:]
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
		return
	}
	require.Equal(t, want, current, "docs/lifecycle.md's diagram is stale: go test ./teraslice -update-docs")
}

// A name nothing knows is one error, whichever package refused it: a
// caller matching either name never misses it.
func TestAnUnknownStatusIsOneErrorForStateAndTable(t *testing.T) {
	_, err := state.Parse("runing")
	require.ErrorIs(t, err, state.ErrUnknownStatus)
	require.ErrorIs(t, err, transition.ErrUnknownState)
	_, err = teraslice.Lifecycle().Parse("runing")
	require.ErrorIs(t, err, transition.ErrUnknownState)
	require.ErrorIs(t, err, state.ErrUnknownStatus)
}

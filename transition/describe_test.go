package transition_test

import (
	"context"
	"testing"

	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// A table rebuilt from its description is the same table, by its names:
// the same states, moves, return edges and terminal states.
func TestATableRebuiltFromItsDescriptionIsTheSameTable(t *testing.T) {
	guarded, err := jobBuilder().Guard(Work, Done, func(context.Context, transition.Change[Job], transition.View) error { return nil }).Build()
	require.NoError(t, err)
	d := guarded.Describe()
	require.Equal(t, "queued", d.Initial)
	require.Equal(t, []string{"queued", "working", "halting", "held", "moving", "done", "broken"}, d.States, "in the order the builder met them")
	require.Equal(t, []string{"done", "broken"}, d.Terminal)
	require.Equal(t, []transition.Edge{{From: "moving", To: "working"}, {From: "moving", To: "held"}}, d.Returns)
	require.Equal(t, []transition.Edge{{From: "working", To: "done"}}, d.Guarded)

	rebuilt, err := transition.Rebuild(d)
	require.NoError(t, err)
	require.Equal(t, d.States, rebuilt.Describe().States)
	require.Equal(t, d.Edges, rebuilt.Describe().Edges)
	require.Equal(t, d.Returns, rebuilt.Describe().Returns)
	require.Empty(t, rebuilt.Describe().Guarded, "guards are code: the rebuilt table has none")
	for _, from := range guarded.States() {
		for _, to := range guarded.States() {
			f, _ := guarded.Name(from)
			tt, _ := guarded.Name(to)
			require.Equal(t, guarded.Allowed(from, to), rebuilt.Allowed(f, tt), "%s → %s", f, tt)
			require.Equal(t, guarded.IsReturn(from, to), rebuilt.IsReturn(f, tt), "%s → %s", f, tt)
		}
	}
}

func TestADescriptionNoTableCanBeBuiltFromIsRefused(t *testing.T) {
	good := jobTable(t).Describe()
	for name, edit := range map[string]func(d *transition.Description){
		"unknown initial": func(d *transition.Description) { d.Initial = "nowhere" },
		"state twice":     func(d *transition.Description) { d.States = append(d.States, "done") },
		"edge to nowhere": func(d *transition.Description) {
			d.Edges = append(d.Edges, transition.Edge{From: "queued", To: "nowhere"})
		},
		"guard on no edge":  func(d *transition.Description) { d.Guarded = []transition.Edge{{From: "queued", To: "done"}} },
		"terminal unlisted": func(d *transition.Description) { d.Terminal = append(d.Terminal, "gone") },
		"edge out of the end": func(d *transition.Description) {
			d.Edges = append(d.Edges, transition.Edge{From: "done", To: "queued"})
		},
		"unreachable state": func(d *transition.Description) { d.States = append(d.States, "orphan") },
	} {
		d := good
		d.States = append([]string(nil), good.States...)
		d.Edges = append([]transition.Edge(nil), good.Edges...)
		d.Terminal = append([]string(nil), good.Terminal...)
		edit(&d)
		_, err := transition.Rebuild(d)
		require.ErrorIs(t, err, transition.ErrInvalidDescription, name)
	}
	_, err := transition.Rebuild(transition.Description{})
	require.ErrorIs(t, err, transition.ErrInvalidDescription)
}

package looplabfsm_test

import (
	"testing"

	"github.com/execfsm/execfsm/looplabfsm"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/looplab/fsm"
	"github.com/stretchr/testify/require"
)

// doorEvents is a definition as looplab/fsm programs write them.
func doorEvents() fsm.Events {
	return fsm.Events{
		{Name: "open", Src: []string{"closed"}, Dst: "open"},
		{Name: "close", Src: []string{"open"}, Dst: "closed"},
		{Name: "lock", Src: []string{"closed"}, Dst: "locked"},
		{Name: "unlock", Src: []string{"locked"}, Dst: "closed"},
		{Name: "break", Src: []string{"open", "closed", "locked"}, Dst: "broken"},
		{Name: "knock", Src: []string{"closed", "locked"}, Dst: "closed"}, // no move from closed
	}
}

func TestTableHasEveryMoveOfTheEventsAndTheirSinksAsTerminal(t *testing.T) {
	table, err := looplabfsm.Table("closed", doorEvents())
	require.NoError(t, err)
	require.Equal(t, "closed", table.Initial())
	require.Equal(t, []string{"closed", "open", "locked", "broken"}, table.States())
	allowed := map[[2]string]bool{
		{"closed", "open"}: true, {"open", "closed"}: true, {"closed", "locked"}: true,
		{"locked", "closed"}: true, {"open", "broken"}: true, {"closed", "broken"}: true,
		{"locked", "broken"}: true,
	}
	for _, from := range table.States() {
		for _, to := range table.States() {
			require.Equal(t, allowed[[2]string{from, to}], table.Allowed(from, to), "%s → %s", from, to)
		}
	}
	require.True(t, table.IsTerminal("broken"))
	require.False(t, table.IsTerminal("locked"))
	require.Contains(t, table.Mermaid(), "locked --> closed")
	transitiontest.Check(t, table)
}

func TestTableOfACycleWithoutASinkBuilds(t *testing.T) {
	table, err := looplabfsm.Table("closed", fsm.Events{
		{Name: "open", Src: []string{"closed"}, Dst: "open"},
		{Name: "close", Src: []string{"open"}, Dst: "closed"},
	})
	require.NoError(t, err)
	require.False(t, table.IsTerminal("closed"))
	require.False(t, table.IsTerminal("open"))
}

func TestTableListsEveryProblemLooplabDoesNotCheck(t *testing.T) {
	_, err := looplabfsm.Table("closed", fsm.Events{
		{Name: "open", Src: []string{"closed"}, Dst: "open"},
		{Name: "open", Src: []string{"closed"}, Dst: "ajar"}, // a second destination
		{Name: "close", Src: []string{"open"}, Dst: "closed"},
		{Name: "fall", Src: []string{"attic"}, Dst: "closed"}, // nothing reaches attic
		{Name: "jam", Src: []string{"open"}, Dst: "jammed"},
		{Name: "wiggle", Src: []string{"jammed"}, Dst: "stuck"},
		{Name: "wobble", Src: []string{"stuck"}, Dst: "jammed"}, // jammed ⇄ stuck: a trap
		{Name: "break", Src: []string{"closed"}, Dst: "broken"},
		{Name: "", Src: []string{"closed"}, Dst: "open"},
		{Name: "vanish", Dst: "gone"},
	})
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	var built *transition.BuildError
	require.ErrorAs(t, err, &built)
	text := err.Error()
	for _, want := range []string{
		`"open") from "closed" leads to both "open" and "ajar"`,
		"state attic is unreachable",
		"state jammed is a trap",
		"state stuck is a trap",
		"event 8 has no name",
		`event 9 ("vanish") has no source state`,
	} {
		require.Contains(t, text, want)
	}
}

func TestTableRefusesAnEmptyInitialState(t *testing.T) {
	_, err := looplabfsm.Table("", doorEvents())
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	require.ErrorContains(t, err, "empty initial state")
}

package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// tableMoves lists a table's moves ("a → b", "a ↩ b" for a return edge) and
// its terminal states, sorted, to compare two tables by what they allow.
func tableMoves[S comparable](t *transition.Table[S]) []string {
	d := t.Describe()
	var out []string
	for _, e := range d.Edges {
		out = append(out, e.From+" → "+e.To)
	}
	for _, e := range d.Returns {
		out = append(out, e.From+" ↩ "+e.To)
	}
	for _, s := range d.Terminal {
		out = append(out, "terminal "+s)
	}
	slices.Sort(out)
	return out
}

// The roles write the moves they need: a render job's lifecycle given
// as its roles, its own pause and resume and a guard comes out as the
// table a user wrote by hand, every Allow, Return and Terminal of it.
func TestDefineLifecycleWritesTheMovesTheRolesNeed(t *testing.T) {
	guard := func(context.Context, transition.Change[string], transition.View) error { return nil }
	running := []string{"rendering", "paused"}
	byHand, err := transition.New("queued").
		Allow("queued", "rendering", "cancelling", "cancelled", "failed").
		Allow("rendering", "paused", "moving", "cancelling", "done", "failed", "cancelled").
		Allow("paused", "rendering", "moving", "cancelling", "done", "failed", "cancelled").
		Return("moving", running...).
		Allow("moving", "queued", "cancelling", "failed").
		Allow("cancelling", "cancelled", "done", "failed").
		Terminal("done", "failed", "cancelled").
		Guard("rendering", "done", guard).Build()
	require.NoError(t, err)

	roles, err := recovery.DefineLifecycle(transition.New("queued").
		Allow("rendering", "paused").Allow("paused", "rendering").Guard("rendering", "done", guard)).
		NotStarted("queued").Running(running...).Relocating("moving", "queued").
		Stopping("cancelling", "cancelled").Failed("failed").Ends("done", "cancelled").Build()
	require.NoError(t, err)
	require.Equal(t, tableMoves(byHand), tableMoves(roles.Table()))
	require.True(t, roles.Table().Guarded("rendering", "done"), "the table's own guard is kept")
}

// Several relocating states each return to the running states the table
// gives them; one given none returns to the rest. A state the roles do
// not end (a failed state that is parked) is not made terminal.
func TestDefineLifecycleKeepsTheReturnsAndRolesTheTableGives(t *testing.T) {
	roles, err := recovery.DefineLifecycle(transition.New("pending").
		Return("evicting", "running").Allow("running", "draining-ok").Allow("parked", "pending")).
		NotStarted("pending").Running("running", "draining-ok").
		Relocating("evicting", "pending").Relocating("moving", "pending").
		Failed("parked").Parked("parked").Build()
	require.NoError(t, err)
	table := roles.Table()
	require.True(t, table.IsReturn("evicting", "running"))
	require.False(t, table.Allowed("evicting", "draining-ok"), "evicting returns only where the table said")
	require.True(t, table.IsReturn("moving", "draining-ok"), "moving returns to the rest")
	require.False(t, table.Allowed("moving", "running"))
	require.False(t, table.IsTerminal("parked"), "a parked failure is not an end")
	require.True(t, table.Allowed("running", "parked"))
}

// A table the roles cannot complete is refused with the table's own
// problems, under both sentinels.
func TestDefineLifecycleReportsTheTablesProblems(t *testing.T) {
	_, err := recovery.DefineLifecycle(transition.New("queued").Allow("queued", "queued")).
		NotStarted("queued").Running("running").Failed("failed").Build()
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	require.ErrorContains(t, err, "self edge")
	_, err = recovery.DefineLifecycle[string](nil).Running("x").Build()
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	require.True(t, errors.Is(err, recovery.ErrInvalidRoles))
}

// A lifecycle is its roles: the table has every move they need, and only
// the moves between running states are written by hand.
func ExampleDefineLifecycle() {
	roles, err := recovery.DefineLifecycle(transition.New("queued").
		Allow("rendering", "paused").Allow("paused", "rendering")). // what only the lifecycle knows
		NotStarted("queued").Running("rendering", "paused").Relocating("moving", "queued").
		Stopping("cancelling", "cancelled").Failed("failed").Ends("done", "cancelled").Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(roles.Table().Next("rendering"))
	fmt.Println(roles.Table().Next("moving"))
	// Output:
	// [paused failed cancelled cancelling done moving]
	// [queued rendering paused failed cancelling]
}

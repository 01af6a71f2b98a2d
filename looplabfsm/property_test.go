package looplabfsm_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/execfsm/execfsm/looplabfsm"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/looplab/fsm"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestThePersistedMachineBehavesAsLooplabsAndTheStoreFollows fires random
// events (allowed or not, some cancelled by a callback) at an FSM and at
// a plain looplab/fsm machine of the same definition, with an operator
// now and then moving the stored execution behind the FSM's back. The
// FSM answers as looplab/fsm does, never runs ahead of the store, and the
// audit trail holds exactly the moves made, in order.
func TestThePersistedMachineBehavesAsLooplabsAndTheStoreFollows(t *testing.T) {
	names := []string{"open", "close", "lock", "unlock", "break", "knock", "fly"}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		store := storage.NewMemory()
		table := doorTable(t)
		veto := map[string]bool{} // events a before_ callback cancels
		cancelling := fsm.Callbacks{"before_event": func(_ context.Context, e *fsm.Event) {
			if veto[e.Event] {
				e.Cancel(fmt.Errorf("vetoed %s", e.Event))
			}
		}}
		plain := fsm.NewFSM("closed", doorEvents(), cancelling)
		p, err := transition.NewPersisted(table, store, doorID, transition.PersistedOptions{History: storage.MaxHistory})
		require.NoError(rt, err)
		door, err := looplabfsm.Open(ctx, p, looplabfsm.Options{Events: doorEvents(), Callbacks: cancelling, Lease: lease("pod-a")})
		require.NoError(rt, err)
		defer func() { _ = door.Persisted().Ownership().Release(ctx) }()
		operator, err := transition.NewPersisted(table, store, doorID, transition.PersistedOptions{})
		require.NoError(rt, err)

		want := []string{"created", "acquired"}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			if rapid.IntRange(0, 9).Draw(rt, "operator") == 0 {
				mem := door.Current()
				next := table.Next(mem)
				if len(next) == 0 {
					continue
				}
				to := rapid.SampledFrom(next).Draw(rt, "operator-to")
				_, err := operator.Fire(ctx, to, "operator")
				require.NoError(rt, err)
				want = append(want, "operator")
				// Whatever the event, the FSM cannot move: looplab/fsm
				// refuses it, a callback cancels it, or the store does.
				require.Error(rt, door.Event(ctx, rapid.SampledFrom(names).Draw(rt, "event-behind")))
				require.Equal(rt, mem, door.Current(), "the machine does not move past a store that moved")
				require.Equal(rt, to, stored(t, store).Status)
				require.NoError(rt, door.Sync(ctx))
				require.Equal(rt, to, door.Current())
				plain.SetState(to)
				continue
			}
			name := rapid.SampledFrom(names).Draw(rt, "event")
			veto[name] = rapid.IntRange(0, 5).Draw(rt, "veto") == 0
			from := plain.Current()
			plainErr := plain.Event(ctx, name)
			doorErr := door.Event(ctx, name)
			require.Equal(rt, fmt.Sprintf("%T", plainErr), fmt.Sprintf("%T", doorErr), "%v / %v", plainErr, doorErr)
			require.Equal(rt, plain.Current(), door.Current())
			require.Equal(rt, door.Current(), stored(t, store).Status, "the store holds the machine's state")
			if door.Current() != from {
				want = append(want, name)
			}
		}
		require.Equal(rt, want, reasons(stored(t, store)))
	})
}

package transition_test

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// Zero values are not usable, and say so: every method that could block,
// write or index returns an error naming the constructor, or a zero
// answer. Never a panic, never a hang.
func TestZeroValuesFailWithAnErrorNotAPanicOrAHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var m transition.Machine[SimState]
	_, err := m.Fire(ctx, Running, "")
	require.ErrorContains(t, err, "NewMachine")
	require.Equal(t, SimState(""), m.State())
	_, had := m.Previous()
	require.False(t, had)

	var p transition.Persisted[SimState]
	_, _, err = p.Load(ctx)
	require.ErrorContains(t, err, "NewPersisted")
	_, err = p.Fire(ctx, Running, "")
	require.ErrorContains(t, err, "NewPersisted")
	_, _, err = p.Apply(ctx, func(SimState, storage.Record) (transition.Update[SimState], error) {
		return transition.To(Running), nil
	})
	require.ErrorContains(t, err, "NewPersisted")
	_, err = p.Create(ctx, transition.To(Idle))
	require.ErrorContains(t, err, "NewPersisted")
	_, _, err = p.Acquire(ctx, storage.Lease{Holder: "pod-a", TTL: time.Minute}, nil)
	require.ErrorContains(t, err, "NewPersisted")
	require.Nil(t, p.Ownership())

	var table transition.Table[SimState]
	_, err = transition.NewMachine(&table, transition.MachineOptions{})
	require.ErrorContains(t, err, "zero Table")
	_, err = transition.NewMachineAt(&table, Idle, transition.MachineOptions{})
	require.Error(t, err)
	_, err = transition.NewPersisted(&table, storage.NewMemory(), "ex-1", transition.PersistedOptions{})
	require.ErrorContains(t, err, "zero Table")
	require.Equal(t, SimState(""), table.Initial())
	require.False(t, table.Allowed(Idle, Starting))
	require.False(t, table.Has(Idle))
	require.Empty(t, table.States())
	require.Empty(t, table.Next(Idle))
	require.Nil(t, table.Path(Idle, Running))
	_, err = table.Parse("idle")
	require.ErrorIs(t, err, transition.ErrUnknownState)
	_ = table.Mermaid()
	_ = table.DOT()
}

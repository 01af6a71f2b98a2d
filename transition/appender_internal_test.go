package transition

import (
	"context"
	"sync"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// A handle holds a trail appender only once it writes: a controller
// restarted over many executions holds a handle for each, and reading,
// observing and reconciling without a change make none. Handles racing
// to their first write share the one that won.
func TestATrailAppenderIsMadeByTheFirstWrite(t *testing.T) {
	ctx := context.Background()
	table, err := New("queued").Allow("queued", "working").Allow("working", "queued").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	creator, err := NewPersisted(table, store, "ex-1", PersistedOptions{})
	require.NoError(t, err)
	_, err = creator.Create(ctx, To("queued"))
	require.NoError(t, err)
	require.Nil(t, creator.shared.trails.Load(), "a creation starts the trail; it appends nothing")

	p, err := NewPersisted(table, store, "ex-1", PersistedOptions{})
	require.NoError(t, err)
	_, rec, err := p.Load(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Prime(ctx, rec))
	_, _, err = p.Apply(ctx, func(cur string, _ storage.Record) (Update[string], error) { return To(cur), nil })
	require.NoError(t, err)
	require.Nil(t, p.shared.trails.Load(), "nothing written: no appender")

	var wg sync.WaitGroup
	made := make([]*storage.TrailAppender, 8)
	for k := range made {
		wg.Add(1)
		go func() {
			defer wg.Done()
			made[k] = p.shared.appender()
		}()
	}
	wg.Wait()
	for _, a := range made {
		require.Same(t, made[0], a, "one appender, whoever made it")
	}
	_, err = p.Fire(ctx, "working", "picked up")
	require.NoError(t, err)
	require.Same(t, made[0], p.shared.trails.Load())
	got, err := store.Get(ctx, "ex-1")
	require.NoError(t, err)
	require.Equal(t, 2, got.History.Len(), "created, then picked up")
}

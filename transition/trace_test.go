package transition_test

import (
	"context"
	"sync"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

type traceKey struct{}

// recordingTracer records what a Persisted tells its Tracer; every write
// it starts carries a number in its context.
type recordingTracer struct {
	mu      sync.Mutex
	started int
	ended   []string // "n: from→to" or "n: error"
}

func (r *recordingTracer) StartWrite(ctx context.Context, id string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started++
	return context.WithValue(ctx, traceKey{}, r.started)
}

func (r *recordingTracer) Annotate(ctx context.Context, c transition.Change[string]) map[string]string {
	if c.To != "parked" {
		return nil
	}
	return map[string]string{"trace": "write-" + string(rune('0'+ctx.Value(traceKey{}).(int)))}
}

func (r *recordingTracer) EndWrite(ctx context.Context, c transition.Change[string], err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := string(rune('0' + ctx.Value(traceKey{}).(int)))
	if err != nil {
		r.ended = append(r.ended, n+": error")
		return
	}
	r.ended = append(r.ended, n+": "+c.From+"→"+c.To)
}

// A Tracer sees every write start and end once, in the context the write
// ran in (its guards see the same), and what it annotates a move with is
// written with it; a failed write ends with its error and no change.
func TestATracerFollowsEveryWriteAndAnnotatesMoves(t *testing.T) {
	var guardSaw []int
	table, err := transition.New("queued").Allow("queued", "running").Allow("running", "parked").Allow("parked", "running").Allow("running", "done").Terminal("done").
		Guard("running", "parked", func(ctx context.Context, _ transition.Change[string], _ transition.View) error {
			guardSaw = append(guardSaw, ctx.Value(traceKey{}).(int))
			return nil
		}).Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	tracer := &recordingTracer{}
	exec, err := transition.NewPersisted(table, store, "ex", transition.PersistedOptions{Actor: "me"}, transition.Observers[string]{Tracer: tracer})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = exec.Create(ctx, transition.To("queued"))
	require.NoError(t, err)
	_, err = exec.Fire(ctx, "running", "go")
	require.NoError(t, err)
	_, err = exec.Fire(ctx, "parked", "wait")
	require.NoError(t, err)
	_, err = exec.Fire(ctx, "queued", "not an edge")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	rec, err := store.Get(ctx, "ex")
	require.NoError(t, err)
	require.Equal(t, "write-3", rec.Meta["trace"], "the move to parked carries what its write's tracer gave")
	require.Equal(t, []int{3}, guardSaw, "the guard ran in the write's context")
	require.Equal(t, []string{"1: →queued", "2: queued→running", "3: running→parked", "4: error"}, tracer.ended)

	_, err = exec.Fire(ctx, "running", "again")
	require.NoError(t, err)
	rec, err = store.Get(ctx, "ex")
	require.NoError(t, err)
	require.Equal(t, "write-3", rec.Meta["trace"], "a move elsewhere annotates nothing, and removes nothing")
}

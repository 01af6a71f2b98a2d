package transition_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// failures records what OnFailure observers are told.
type failures[S comparable] struct{ got []transition.Failure[S] }

func (f *failures[S]) observe(x transition.Failure[S]) { f.got = append(f.got, x) }

// Every Persisted call that fails is told to OnFailure, with the move it
// refused when the move was known; a conflict a retry resolved is not a
// failure, nor is a write that changes nothing.
func TestPersistedTellsOnFailureOfEveryFailedMove(t *testing.T) {
	var seen failures[Job]
	veto := errors.New("not on fridays")
	table, err := jobBuilder().Guard(Work, Hold, func(context.Context, transition.Change[Job], transition.View) error { return veto }).Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	opts, observers := transition.PersistedOptions{Actor: "ctl", Clock: fixedClock()}, transition.Observers[Job]{OnFailure: []func(transition.Failure[Job]){seen.observe}}
	p, err := transition.NewPersisted(table, store, "ex-1", opts, observers)
	require.NoError(t, err)
	_, err = p.Create(bg, transition.To(Queued))
	require.NoError(t, err)

	_, err = p.Fire(bg, Done, "skip the work")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	_, err = p.Fire(bg, Work, "scheduled")
	require.NoError(t, err)
	_, err = p.Fire(bg, Work, "again") // changes nothing: no failure
	require.NoError(t, err)
	_, err = p.Fire(bg, Hold, "pause")
	require.ErrorIs(t, err, transition.ErrGuard)
	_, _, err = p.Apply(bg, func(Job, storage.Record) (transition.Update[Job], error) { return transition.Update[Job]{}, veto })
	require.ErrorIs(t, err, veto)

	_, _, err = p.Acquire(bg, storage.Lease{Holder: "pod-a", TTL: time.Minute}, nil)
	require.NoError(t, err)
	require.NoError(t, p.Ownership().Release(bg))
	_, err = p.Fire(bg, Moving, "SIGTERM")
	require.ErrorIs(t, err, storage.ErrFenced)

	require.Len(t, seen.got, 4)
	for i, want := range []struct {
		from, to Job
		decided  bool
		match    error
		owner    string
	}{
		{Queued, Done, true, transition.ErrNotAllowed, ""},
		{Work, Hold, true, transition.ErrGuard, ""},
		{"", "", false, veto, ""},
		{Work, Moving, true, storage.ErrFenced, "pod-a"},
	} {
		f := seen.got[i]
		require.Equal(t, want.decided, f.Decided, "failure %d", i)
		require.ErrorIs(t, f.Err, want.match, "failure %d", i)
		require.Equal(t, want.from, f.Move.From, "failure %d", i)
		require.Equal(t, want.to, f.Move.To, "failure %d", i)
		require.Equal(t, "ex-1", f.Move.ID)
		require.Equal(t, "ctl", f.Move.Actor)
		require.Equal(t, want.owner, f.Move.Owner, "failure %d", i)
		if want.decided {
			require.False(t, f.Move.At.IsZero(), "a decided move is stamped")
		}
	}
}

// A write that loses every race is a conflict failure once the retries
// run out, and only then.
func TestPersistedTellsOnFailureOfAConflictOnlyWhenTheRetriesRunOut(t *testing.T) {
	for _, retries := range []int{transition.NoRetries, 2} {
		t.Run(fmt.Sprint("retries=", retries), func(t *testing.T) {
			base, mem := created(t, transition.PersistedOptions{})
			n, interferences := 0, 100
			if retries == 2 {
				interferences = 2 // the third attempt wins
			}
			store := &interfering{Store: mem, n: interferences, write: func() {
				n++
				_, _, err := base.Apply(bg, func(cur Job, _ storage.Record) (transition.Update[Job], error) {
					return transition.To(cur).Set("n", fmt.Sprint(n)), nil
				})
				require.NoError(t, err)
			}}
			var seen failures[Job]
			p := newJob(t, store, transition.PersistedOptions{Retries: retries}, transition.Observers[Job]{OnFailure: []func(transition.Failure[Job]){seen.observe}})
			_, err := p.Fire(bg, Work, "")
			if retries == 2 {
				require.NoError(t, err)
				require.Empty(t, seen.got)
				return
			}
			require.ErrorIs(t, err, storage.ErrConflict)
			require.Len(t, seen.got, 1)
			require.True(t, seen.got[0].Decided)
			require.Equal(t, Queued, seen.got[0].Move.From)
			require.Equal(t, Work, seen.got[0].Move.To)
		})
	}
}

// A Machine tells OnFailure of refused moves and done contexts, and an
// observer that panics is reported without stopping the others.
func TestMachineTellsOnFailureOfEveryRefusedMove(t *testing.T) {
	var seen failures[Job]
	var panicked []any
	m, err := transition.NewMachine(jobTable(t), transition.MachineOptions{ID: "ex-1"}, transition.Observers[Job]{OnFailure: []func(transition.Failure[Job]){
		func(transition.Failure[Job]) { panic("observer bug") },
		seen.observe,
	},
		OnObserverPanic: func(_ transition.Change[Job], v any) { panicked = append(panicked, v) }})
	require.NoError(t, err)
	_, err = m.Fire(bg, Done, "")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	_, err = m.Fire(bg, Job("nowhere"), "")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = m.Fire(ctx, Work, "")
	require.ErrorIs(t, err, context.Canceled)
	_, err = m.Fire(bg, Work, "")
	require.NoError(t, err)

	require.Len(t, seen.got, 3)
	require.Equal(t, []any{"observer bug", "observer bug", "observer bug"}, panicked)
	for i, to := range []Job{Done, "nowhere", Work} {
		require.True(t, seen.got[i].Decided)
		require.Equal(t, Queued, seen.got[i].Move.From)
		require.Equal(t, to, seen.got[i].Move.To)
		require.Equal(t, "ex-1", seen.got[i].Move.ID)
	}
	require.ErrorIs(t, seen.got[2].Err, context.Canceled)
}

func TestOnFailureMayNotBeNil(t *testing.T) {
	_, err := transition.NewMachine(jobTable(t), transition.MachineOptions{}, transition.Observers[Job]{OnFailure: []func(transition.Failure[Job]){nil}})
	require.ErrorContains(t, err, "OnFailure[0] is nil")
	_, err = transition.NewPersisted(jobTable(t), storage.NewMemory(), "ex-1", transition.PersistedOptions{}, transition.Observers[Job]{OnFailure: []func(transition.Failure[Job]){nil}})
	require.ErrorContains(t, err, "OnFailure[0] is nil")
}

package fleettest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery/fleettest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// A user's own invariant is checked at every state, and its error is
// reported under its name with the shortest path to it.
func TestAUsersInvariantIsCheckedAtEveryState(t *testing.T) {
	f := lifecycle()
	f.Invariants = []fleettest.Invariant{{Name: "NeverPaused", Check: func(records []storage.Record) error {
		for _, rec := range records {
			if rec.Status == "paused" {
				return fmt.Errorf("%s is paused", rec.ID)
			}
		}
		return nil
	}}}
	v := violation(t, f, fleettest.DefaultBound())
	require.Equal(t, "NeverPaused", v.Invariant)
	require.Equal(t, "ex-1 is paused", v.Problem)
	require.Equal(t, []string{"platform spawn ex-1", "pod-1 start", "pod-1 run", "master pause ex-1"}, v.Path)
}

// Walks go deeper than the exhaustive search; the same seed takes the
// same walks, and a violation comes back shortened, with its seed.
func TestWalksAreReproducibleAndShortenWhatTheyFind(t *testing.T) {
	ctx := context.Background()
	b := fleettest.Bound{Pods: 3, Crashes: 2, Drains: 3}
	first, err := lifecycle().RandomWalks(ctx, b, 7, 200, 40)
	require.NoError(t, err)
	again, err := lifecycle().RandomWalks(ctx, b, 7, 200, 40)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, 200, first.Walks)
	require.Greater(t, first.States, 200)

	// A seed whose 200 walks reach the simulator's lost stop (about two
	// seeds in five do; which ones changes with what the fleet's
	// controllers do).
	_, err = simulator(t, false).RandomWalks(ctx, b, 15, 200, 40)
	var v *fleettest.Violation
	require.True(t, errors.As(err, &v), "want a violation, got %v", err)
	require.Equal(t, fleettest.InvariantStopNeverLost, v.Invariant)
	require.Equal(t, uint64(15), v.Seed)
	require.LessOrEqual(t, len(v.Path), 6, "shortened: %q", v.Path)
	var replayed *fleettest.Violation
	require.True(t, errors.As(simulator(t, false).Replay(ctx, b, v.Path), &replayed))
	require.Equal(t, v.Invariant, replayed.Invariant)
}

// Three pods, two crashes and two drains, with reruns and the master
// abandoning executions whose Job gave up: a wider fleet, walked deep.
func TestAWiderFleetWalkedDeepKeepsEveryInvariant(t *testing.T) {
	f := lifecycle()
	f.Master.Abandons, f.Master.Reruns = true, 1
	r, err := f.RandomWalks(context.Background(), fleettest.Bound{Pods: 3, Crashes: 2, Drains: 2}, 1, 3000, 60)
	require.NoError(t, err)
	t.Log(r)
}

func TestBadFleetsAndPathsAreRefused(t *testing.T) {
	ctx := context.Background()
	for name, f := range map[string]fleettest.Fleet[state.Status]{
		"no roles": {},
		"a move the table does not have": func() fleettest.Fleet[state.Status] {
			f := lifecycle()
			f.Master.Moves = append(f.Master.Moves, fleettest.Move[state.Status]{Name: "undo", From: state.Completed, To: state.Running})
			return f
		}(),
		"an invariant without a check": func() fleettest.Fleet[state.Status] {
			f := lifecycle()
			f.Invariants = []fleettest.Invariant{{Name: "x"}}
			return f
		}(),
	} {
		_, err := f.Explore(ctx, fleettest.DefaultBound())
		require.ErrorIs(t, err, fleettest.ErrInvalidFleet, name)
	}
	for _, b := range []fleettest.Bound{{}, {Depth: 3}, {Depth: 3, Pods: 1, Crashes: -1}, {Depth: fleettest.MaxDepth + 1, Pods: 1}} {
		_, err := lifecycle().Explore(ctx, b)
		require.ErrorIs(t, err, fleettest.ErrInvalidFleet, "%+v", b)
	}
	for _, path := range [][]string{
		{"pod-1 start"},
		{"platform spawn ex-1", "pod-1 start [race@1: pod-1 start]"},
		{"platform spawn ex-1", "pod-1 start [race@x]"},
	} {
		require.ErrorIs(t, lifecycle().Replay(ctx, fleettest.DefaultBound(), path), fleettest.ErrInvalidPath, "%q", path)
	}
	require.NoError(t, lifecycle().Replay(ctx, fleettest.DefaultBound(), []string{"platform spawn ex-1", "pod-1 start", "pod-1 run"}))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := lifecycle().Explore(cancelled, fleettest.DefaultBound())
	require.ErrorIs(t, err, context.Canceled)
}

// fakeT is a testing.TB whose deadline a test sets, recording how Check
// fails it.
type fakeT struct {
	testing.TB
	deadline time.Time
	failed   string
}

func (f *fakeT) Deadline() (time.Time, bool) { return f.deadline, true }
func (f *fakeT) Helper()                     {}
func (f *fakeT) Logf(string, ...any)         {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeT) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

// An exploration that would outlast its test fails before the test's
// deadline, saying how far it got, instead of hanging until go test
// kills everything.
func TestCheckStopsBeforeTheTestsDeadline(t *testing.T) {
	ft := &fakeT{TB: t, deadline: time.Now().Add(200 * time.Millisecond)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fleettest.Check(ft, lifecycle(), fleettest.Bound{Depth: 40, Pods: 3, Crashes: 2, Drains: 2})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Check did not stop at its deadline")
	}
	require.Contains(t, ft.failed, "did not end before the test's deadline")
}

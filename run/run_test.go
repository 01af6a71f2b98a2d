package run_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// execution creates ex-1 in s as the cluster master does.
func execution(t *testing.T, store storage.Store, s state.Status) {
	t.Helper()
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(s).Because("placed"))
	require.NoError(t, err)
}

func status(t *testing.T, store storage.Store) string {
	t.Helper()
	rec, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	return rec.Status
}

// controller is a Run in the background, its SIGTERMs sent by the test.
type controller struct {
	signals chan os.Signal
	started chan struct{} // closed when the work runs
	done    chan result
}

type result struct {
	code int
	err  error
}

// sigterm sends a SIGTERM on signals and returns what the harness
// returned, failing the test if it does not within a bound.
func sigterm(t *testing.T, signals chan<- os.Signal, done <-chan result) result {
	t.Helper()
	signals <- syscall.SIGTERM
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the harness did not return after SIGTERM")
		return result{}
	}
}

// work runs until ctx is cancelled, or finishes at once when finish is set.
func start(t *testing.T, store storage.Store, platform recovery.Platform, finish *recovery.Ending) *controller {
	t.Helper()
	c := &controller{signals: make(chan os.Signal, 1), started: make(chan struct{}), done: make(chan result, 1)}
	cfg := run.Config[state.Status]{
		Roles: teraslice.Roles(), Store: store, ID: "ex-1", Table: "teraslice", Holder: "pod-a",
		Platform: platform, Resumable: true, Failovers: teraslice.Failovers, Signals: c.signals,
		StopCheck: 10 * time.Millisecond,
		Work: func(ctx context.Context, _ *transition.Persisted[state.Status], _ state.Status) recovery.Ending {
			close(c.started)
			if finish != nil {
				return *finish
			}
			<-ctx.Done()
			return recovery.Ending{}
		},
	}
	go func() {
		code, err := run.Run(bg, cfg)
		c.done <- result{code, err}
	}()
	return c
}

func (c *controller) wait(t *testing.T) result {
	t.Helper()
	select {
	case r := <-c.done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return result{}
	}
}

func (c *controller) running(t *testing.T) {
	t.Helper()
	select {
	case <-c.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the work never ran")
	}
}

// Work that finishes writes its end and exits 0, on every platform.
func TestFinishedWorkExitsZero(t *testing.T) {
	for _, p := range []recovery.Platform{recovery.KubernetesJob, recovery.SystemdOnFailure, recovery.Unmanaged} {
		store := storage.NewMemory()
		execution(t, store, state.Initializing)
		c := start(t, store, p, &recovery.Ending{Finished: true})
		r := c.wait(t)
		require.NoError(t, r.err, p.Name)
		require.Equal(t, 0, r.code, p.Name)
		require.Equal(t, "completed", status(t, store), p.Name)
	}
}

// A SIGTERM under a platform that drains relocates (exit 143: the next
// pod resumes); under one whose SIGTERM is a stop it shuts down (exit 0).
func TestASigtermRelocatesOrShutsDownAsThePlatformMeansIt(t *testing.T) {
	for _, tc := range []struct {
		platform recovery.Platform
		code     int
		status   string
	}{
		{recovery.KubernetesJob, 143, "relocating"},
		{recovery.KubernetesDeployment, 143, "relocating"},
		{recovery.SystemdOnFailure, 0, "terminated"},
		{recovery.SystemdAlways, 0, "terminated"},
		{recovery.Unmanaged, 0, "terminated"},
	} {
		store := storage.NewMemory()
		execution(t, store, state.Initializing)
		c := start(t, store, tc.platform, nil)
		c.running(t)
		c.signals <- syscall.SIGTERM
		r := c.wait(t)
		require.NoError(t, r.err, tc.platform.Name)
		require.Equal(t, tc.code, r.code, tc.platform.Name)
		require.Equal(t, tc.status, status(t, store), tc.platform.Name)
	}
}

// A crash (the record running, nobody holding it) resumes where the
// platform restarts controllers, and fails where none does.
func TestACrashResumesOnlyWhereThePlatformRestarts(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Running)
	c := start(t, store, recovery.Unmanaged, nil)
	r := c.wait(t)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code, "failed is written: the outcome is in the record")
	require.Equal(t, "failed", status(t, store))

	store = storage.NewMemory()
	execution(t, store, state.Running)
	c = start(t, store, recovery.SystemdOnFailure, nil)
	c.running(t)
	c.signals <- syscall.SIGTERM
	r = c.wait(t)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code)
	require.Equal(t, "terminated", status(t, store))
}

// A live holder: the controller waits; a SIGTERM while it waits leaves,
// with the exit code that makes a Job start another.
func TestAControllerThatNeverGotTheExecutionLeaves(t *testing.T) {
	for _, tc := range []struct {
		platform recovery.Platform
		code     int
	}{{recovery.KubernetesJob, 143}, {recovery.SystemdOnFailure, 143}, {recovery.KubernetesDeployment, 0}, {recovery.Unmanaged, 0}} {
		store := storage.NewMemory()
		execution(t, store, state.Running)
		other, _, err := store.Acquire(bg, "ex-1", storage.Lease{Holder: "pod-z"})
		require.NoError(t, err)
		c := start(t, store, tc.platform, nil)
		time.Sleep(20 * time.Millisecond) // it waits for pod-z; nothing would change if it had not begun to
		c.signals <- syscall.SIGTERM
		r := c.wait(t)
		require.NoError(t, r.err, tc.platform.Name)
		require.Equal(t, tc.code, r.code, tc.platform.Name)
		require.Equal(t, "running", status(t, store), "%s: nothing written", tc.platform.Name)
		require.NoError(t, other.Release(bg))
	}
}

// The cluster master's stop: the work is stopped, the stop's end written.
func TestAStopEndsTheWorkAndWritesStopped(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Initializing)
	c := start(t, store, recovery.KubernetesJob, nil)
	c.running(t)
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Fire(bg, state.Stopping, "user stop")
	require.NoError(t, err)
	r := c.wait(t)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code)
	require.Equal(t, "stopped", status(t, store))
}

// An ownership lost while the work runs (a store outage outlasted the
// lease): the controller starts again and, nobody having taken over,
// takes the execution back and runs it, counting nothing.
func TestALostOwnershipIsTakenBack(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Initializing)
	runs := make(chan *transition.Persisted[state.Status], 2)
	signals := make(chan os.Signal, 1)
	done := make(chan result, 1)
	go func() {
		code, err := run.Run(bg, run.Config[state.Status]{
			Roles: teraslice.Roles(), Store: store, ID: "ex-1", Holder: "pod-a", Platform: recovery.KubernetesJob,
			Resumable: true, Signals: signals, StopCheck: -1,
			Work: func(ctx context.Context, exec *transition.Persisted[state.Status], _ state.Status) recovery.Ending {
				runs <- exec
				<-ctx.Done()
				return recovery.Ending{}
			},
		})
		done <- result{code, err}
	}()
	var exec *transition.Persisted[state.Status]
	select {
	case exec = <-runs:
	case <-time.After(20 * time.Second):
		t.Fatal("the work never ran")
	}
	require.NoError(t, exec.Ownership().Release(bg))
	select {
	case <-runs:
	case <-time.After(20 * time.Second):
		t.Fatal("the work never ran again")
	}
	rec, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, uint64(2), rec.Epoch, "taken back at a new epoch")
	require.Empty(t, rec.Meta[recovery.MetaFailovers], "counting nothing")
	r := sigterm(t, signals, done)
	require.NoError(t, r.err)
	require.Equal(t, 143, r.code)
}

// A terminal execution is refused: nothing runs, exit 0.
func TestAnEndedExecutionIsRefused(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Completed)
	r := start(t, store, recovery.KubernetesJob, nil).wait(t)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code)
}

// A controller whose execution was retired (deleted once it had ended)
// finds nothing to run and exits 0: a platform that restarts failures
// does not restart it for ever.
func TestARetiredExecutionExitsZero(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Completed)
	rec, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.NoError(t, store.Delete(bg, "ex-1", rec.Revision))
	r := start(t, store, recovery.KubernetesJob, nil).wait(t)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code)
}

func TestAConfigThatCannotRunSaysWhatToGive(t *testing.T) {
	work := func(context.Context, *transition.Persisted[state.Status], state.Status) recovery.Ending {
		return recovery.Ending{}
	}
	for name, c := range map[string]run.Config[state.Status]{
		"Roles":   {Store: storage.NewMemory(), ID: "ex-1", Work: work},
		"Store":   {Roles: teraslice.Roles(), ID: "ex-1", Work: work},
		"Work":    {Roles: teraslice.Roles(), Store: storage.NewMemory(), ID: "ex-1"},
		"ID":      {Roles: teraslice.Roles(), Store: storage.NewMemory(), Work: work},
		"Running": {Roles: teraslice.Roles(), Store: storage.NewMemory(), ID: "ex-1", Work: work, Running: state.Stopping},
	} {
		code, err := run.Run(bg, c)
		require.ErrorIs(t, err, run.ErrInvalidConfig, name)
		require.ErrorContains(t, err, name, name)
		require.Equal(t, 1, code, name)
	}
	_, err := run.Run(bg, run.Config[state.Status]{Roles: teraslice.Roles(), Store: storage.NewMemory(), ID: "ex-1", Work: work,
		Platform: recovery.Platform{Drains: true}})
	require.True(t, errors.Is(err, recovery.ErrInvalidPolicy))
}

// Work whose roles name no Ends (a scheduler whose work says how it
// ended) moves the execution to its end itself; the harness keeps the
// end it finds, and exits 0.
func TestWorkThatNamesItsEndIsKept(t *testing.T) {
	// "succeeded" is an end only this work knows of.
	roles, err := recovery.DefineLifecycle(transition.New("queued").Allow("running", "succeeded").Terminal("succeeded")).
		NotStarted("queued").Running("running").Failed("failed").Stopping("stopping", "stopped").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	master, err := transition.NewPersisted(roles.Table(), store, "job", transition.PersistedOptions{Actor: "user"})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To("queued"))
	require.NoError(t, err)
	code, err := run.Run(bg, run.Config[string]{
		Roles: roles, Store: store, ID: "job", Holder: "runner", Signals: make(chan os.Signal),
		Work: func(ctx context.Context, exec *transition.Persisted[string], _ string) recovery.Ending {
			if _, err := exec.Fire(ctx, "succeeded", "every task succeeded"); err != nil {
				return recovery.Ending{Err: err}
			}
			return recovery.Ending{Finished: true}
		},
	})
	require.NoError(t, err)
	require.Equal(t, 0, code)
	rec, err := store.Get(bg, "job")
	require.NoError(t, err)
	require.Equal(t, "succeeded", rec.Status)
	require.Equal(t, "every task succeeded", rec.Reason)
	_, held, err := store.Held(bg, "job")
	require.NoError(t, err)
	require.False(t, held, "let go")
}

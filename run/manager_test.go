package run_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

var phases = map[string]volcano.Phase{"mnist": volcano.Pending, "resnet": volcano.Running, "bert": volcano.Restarting,
	"suspended": volcano.Aborted, "done": volcano.Completed}

func jobs(t *testing.T) *storage.Memory {
	t.Helper()
	store := storage.NewMemory()
	for id, phase := range phases {
		user, err := transition.NewPersisted(volcano.Lifecycle(), store, id, transition.PersistedOptions{Actor: "vcctl"})
		require.NoError(t, err)
		_, err = user.Create(bg, transition.To(phase))
		require.NoError(t, err)
	}
	return store
}

// manager is a Manage in the background.
type managed struct {
	signals chan os.Signal
	ready   chan int
	done    chan result
	mu      sync.Mutex
	synced  map[string]volcano.Phase
}

func manage(t *testing.T, store storage.Store, holder string) *managed {
	t.Helper()
	m := &managed{signals: make(chan os.Signal, 1), ready: make(chan int, 1), done: make(chan result, 1), synced: map[string]volcano.Phase{}}
	go func() {
		code, err := run.Manage(bg, run.ManagerConfig[volcano.Phase]{
			Roles: volcano.Roles(), Store: store, Table: "volcano-job", Holder: holder, Leader: "controller-manager", HandOver: true,
			TTL: time.Minute, Signals: m.signals, Resync: -1,
			Sync: func(_ context.Context, exec *transition.Persisted[volcano.Phase], phase volcano.Phase) (run.Step, error) {
				m.mu.Lock()
				m.synced[exec.ID()] = phase
				m.mu.Unlock()
				return run.Step{}, nil
			},
			Ready: func(n int) { m.ready <- n },
		})
		m.done <- result{code, err}
	}()
	return m
}

func (m *managed) waitReady(t *testing.T) int {
	t.Helper()
	select {
	case n := <-m.ready:
		return n
	case r := <-m.done:
		t.Fatalf("Manage returned before it was ready: %d %v", r.code, r.err)
	case <-time.After(20 * time.Second):
		t.Fatal("the manager never became ready")
	}
	return 0
}

func (m *managed) stop(t *testing.T) result {
	t.Helper()
	return sigterm(t, m.signals, m.done)
}

// A manager drives every Job that has not ended under its one lease; its
// SIGTERM hands each over as it is and exits 0; the next manager takes
// them over at once.
func TestAManagerDrivesEveryLiveJobAndHandsThemOver(t *testing.T) {
	store := jobs(t)
	a := manage(t, store, "manager-a")
	require.Equal(t, 4, a.waitReady(t), "every Job but the completed one")
	a.mu.Lock()
	require.Equal(t, map[string]volcano.Phase{"mnist": volcano.Pending, "resnet": volcano.Running,
		"bert": volcano.Restarting, "suspended": volcano.Aborted}, a.synced, "each synced in its phase")
	a.mu.Unlock()
	for id := range phases {
		rec, err := store.Get(bg, id)
		require.NoError(t, err)
		require.Equal(t, string(phases[id]), rec.Status, id)
		claim, held, err := store.Held(bg, id)
		require.NoError(t, err)
		if id == "done" {
			require.False(t, held)
			continue
		}
		require.True(t, held, id)
		require.Equal(t, "manager-a", claim.Owner, id)
	}
	r := a.stop(t)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code)
	for id := range phases {
		_, held, err := store.Held(bg, id)
		require.NoError(t, err)
		require.False(t, held, "%s handed over", id)
	}

	b := manage(t, store, "manager-b")
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	select {
	case n := <-b.ready:
		require.Equal(t, 4, n)
	case <-ctx.Done():
		t.Fatal("the next manager waited for the last one's lease")
	}
	rec, err := store.Get(bg, "resnet")
	require.NoError(t, err)
	require.Equal(t, "manager-b", rec.Owner)
	require.Empty(t, rec.Meta[recovery.MetaFailovers])
	require.Equal(t, 0, b.stop(t).code)
}

// A Job that ends is let go; one whose retries are spent is ended by
// the manager's loop, as its budget says.
func TestAManagerEndsWhatFallsDueAndLetsEndedJobsGo(t *testing.T) {
	store := storage.NewMemory()
	user, err := transition.NewPersisted(volcano.Lifecycle(), store, "flaky", transition.PersistedOptions{Actor: "vcctl"})
	require.NoError(t, err)
	_, err = user.Create(bg, transition.Update[volcano.Phase]{To: volcano.Running, Meta: volcano.MaxRetry(1)})
	require.NoError(t, err)
	_, err = user.Fire(bg, volcano.Restarting, "pod evicted")
	require.NoError(t, err)
	m := manage(t, store, "manager-a")
	require.Equal(t, 0, m.waitReady(t), "exhausted at its take-over: failed, let go")
	rec, err := store.Get(bg, "flaky")
	require.NoError(t, err)
	require.Equal(t, string(volcano.Failed), rec.Status)
	_, held, err := store.Held(bg, "flaky")
	require.NoError(t, err)
	require.False(t, held)
	require.Equal(t, 0, m.stop(t).code)
}

func TestAManagerConfigThatCannotRunSaysWhatToGive(t *testing.T) {
	sync := func(context.Context, *transition.Persisted[volcano.Phase], volcano.Phase) (run.Step, error) {
		return run.Step{}, nil
	}
	for name, c := range map[string]run.ManagerConfig[volcano.Phase]{
		"Roles":  {Store: storage.NewMemory(), Sync: sync},
		"Store":  {Roles: volcano.Roles(), Sync: sync},
		"Sync":   {Roles: volcano.Roles(), Store: storage.NewMemory()},
		"TTL":    {Roles: volcano.Roles(), Store: storage.NewMemory(), Sync: sync, TTL: time.Millisecond},
		"Lister": {Roles: volcano.Roles(), Store: struct{ storage.Store }{storage.NewMemory()}, Sync: sync},
		"HandOver": {Roles: volcano.Roles(), Store: storage.NewMemory(), Sync: sync, HandOver: true,
			Platform: recovery.KubernetesDeployment},
	} {
		code, err := run.Manage(bg, c)
		require.ErrorIs(t, err, run.ErrInvalidConfig, name)
		require.ErrorContains(t, err, name, fmt.Sprint(name))
		require.Equal(t, 1, code)
	}
}

// A manager whose work runs in its own process (a render farm's
// renderers) sets each execution up, ends one when its Sync says so, and
// on SIGTERM does what the platform says: on a Job it relocates every
// running execution and exits 143; under systemd a SIGTERM is a stop,
// which shuts each down and exits 0.
func TestAManagerOfWorkInItsProcessRelocatesOrShutsDownAsThePlatformSays(t *testing.T) {
	for _, tc := range []struct {
		platform recovery.Platform
		then     state.Status
		code     int
	}{
		{recovery.KubernetesJob, state.Relocating, 143},
		{recovery.KubernetesDeployment, state.Relocating, 143},
		{recovery.SystemdOnFailure, state.Terminated, 0},
		{recovery.Unmanaged, state.Terminated, 0},
	} {
		t.Run(tc.platform.Name, func(t *testing.T) {
			store := storage.NewMemory()
			for id, s := range map[string]state.Status{"ex-a": state.Initializing, "ex-b": state.Initializing, "ex-done": state.Initializing} {
				master, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "master"})
				require.NoError(t, err)
				_, err = master.Create(bg, transition.To(s).Because("placed"))
				require.NoError(t, err)
			}
			signals, running, done := make(chan os.Signal, 1), make(chan string, 3), make(chan result, 1)
			go func() {
				code, err := run.Manage(bg, run.ManagerConfig[state.Status]{
					Roles: teraslice.Roles(), Store: store, Holder: "farm-a", Platform: tc.platform, Resumable: true,
					Signals: signals, Resync: -1, Workers: 2,
					Sync: func(ctx context.Context, exec *transition.Persisted[state.Status], s state.Status) (run.Step, error) {
						switch {
						case s == state.Initializing:
							_, err := exec.Fire(ctx, state.Running, "set up")
							return run.Step{}, err // moved: synced again at once
						case exec.ID() == "ex-done":
							return run.End(recovery.Ending{Finished: true}), nil
						}
						select {
						case running <- exec.ID():
						default: // seen already
						}
						return run.Step{}, nil
					},
				})
				done <- result{code, err}
			}()
			seen := map[string]bool{}
			for len(seen) < 2 {
				select {
				case id := <-running:
					seen[id] = true
				case r := <-done:
					t.Fatalf("Manage returned %d %v before both ran", r.code, r.err)
				case <-time.After(20 * time.Second):
					t.Fatalf("only %v ran", seen)
				}
			}
			ended := func() bool { rec, err := store.Get(bg, "ex-done"); return err == nil && rec.Status == "completed" }
			require.Eventually(t, ended, 20*time.Second, time.Millisecond, "ex-done completed by its Sync's End")
			r := sigterm(t, signals, done)
			require.NoError(t, r.err)
			require.Equal(t, tc.code, r.code)
			for _, id := range []string{"ex-a", "ex-b"} {
				rec, err := store.Get(bg, id)
				require.NoError(t, err)
				require.Equal(t, tc.then.String(), rec.Status, id)
				_, held, err := store.Held(bg, id)
				require.NoError(t, err)
				require.False(t, held, "%s let go", id)
			}
		})
	}
}

// An operator's stop, written while the manager drives the execution, is
// synced at once (the manager watches the store), not at the next resync:
// here there is none.
func TestAManagerSeesAStopWrittenByAnotherWriter(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Running)
	signals, running, done := make(chan os.Signal, 1), make(chan struct{}, 1), make(chan result, 1)
	go func() {
		code, err := run.Manage(bg, run.ManagerConfig[state.Status]{
			Roles: teraslice.Roles(), Store: store, Holder: "ctl-1", Platform: recovery.KubernetesJob, Resumable: true,
			Failovers: teraslice.Failovers, Signals: signals, Resync: -1,
			Sync: func(_ context.Context, _ *transition.Persisted[state.Status], s state.Status) (run.Step, error) {
				if s == state.Stopping {
					return run.End(recovery.Ending{}), nil
				}
				select {
				case running <- struct{}{}:
				default:
				}
				return run.Step{}, nil
			},
		})
		done <- result{code, err}
	}()
	select {
	case <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("the execution was never synced")
	}
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Fire(bg, state.Stopping, "user stop")
	require.NoError(t, err)
	stopped := func() bool { rec, err := store.Get(bg, "ex-1"); return err == nil && rec.Status == "stopped" }
	require.Eventually(t, stopped, 20*time.Second, time.Millisecond, "the stop was synced")
	r := sigterm(t, signals, done)
	require.NoError(t, r.err)
	require.Equal(t, 0, r.code, "nothing left to relocate")
}

// An execution nothing has started yet (still pending) is let go as it
// is on SIGTERM, released for the next controller, and the exit code is
// the leave's: on a Job the next pod must come.
func TestAManagerLetsAPendingExecutionGoAsItIs(t *testing.T) {
	store := storage.NewMemory()
	execution(t, store, state.Pending)
	signals, ready, done := make(chan os.Signal, 1), make(chan int, 1), make(chan result, 1)
	go func() {
		code, err := run.Manage(bg, run.ManagerConfig[state.Status]{
			Roles: teraslice.Roles(), Store: store, Holder: "ctl-1", Platform: recovery.KubernetesJob, Resumable: true,
			Signals: signals, Resync: -1, Ready: func(n int) { ready <- n },
			Sync: func(context.Context, *transition.Persisted[state.Status], state.Status) (run.Step, error) {
				return run.Step{}, nil // waits for workers
			},
		})
		done <- result{code, err}
	}()
	select {
	case n := <-ready:
		require.Equal(t, 1, n)
	case <-time.After(20 * time.Second):
		t.Fatal("never ready")
	}
	r := sigterm(t, signals, done)
	require.NoError(t, r.err)
	require.Equal(t, 143, r.code)
	rec, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "pending", rec.Status)
	_, held, err := store.Held(bg, "ex-1")
	require.NoError(t, err)
	require.False(t, held)
}

package prom_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/prom"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Statuses.Run and the loops start goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// bound is how long a test waits for anything.
const bound = 20 * time.Second

var bg = context.Background()

// golden compares what c exposes under names with testdata/name.prom, or
// rewrites the file with -update.
func golden(t *testing.T, c prometheus.Collector, file string, names ...string) {
	t.Helper()
	path := filepath.Join("testdata", file+".prom")
	if *update {
		got, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, names...)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.Open(path)
	require.NoError(t, err)
	defer want.Close()
	require.NoError(t, testutil.CollectAndCompare(c, want, names...))
}

func execution(t *testing.T, store storage.Store, id string, s state.Status, opts transition.PersistedOptions, observers ...transition.Observers[state.Status]) *transition.Persisted[state.Status] {
	t.Helper()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, opts, observers...)
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To(s).Because("test"))
	require.NoError(t, err)
	return exec
}

// Moves are counted by from, to and result: done, not_allowed, guard,
// conflict, fenced, error.
func TestTransitionsAreCountedByFromToAndResult(t *testing.T) {
	m := prom.New()
	guarded, err := teraslice.LifecycleBuilder().Guard(state.Running, state.Stopping, func(context.Context, transition.Change[state.Status], transition.View) error {
		return errors.New("maintenance window")
	}).Build()
	require.NoError(t, err)
	counts, err := prom.NewTransitions(m, guarded)
	require.NoError(t, err)
	store := storage.NewMemory()
	exec, err := transition.NewPersisted(guarded, store, "ex-1", transition.PersistedOptions{Actor: "pod-a", Retries: transition.NoRetries}, counts.Observers())
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To(state.Pending))
	require.NoError(t, err)
	for _, to := range []state.Status{state.Scheduling, state.Initializing, state.Running} {
		_, err = exec.Fire(bg, to, "")
		require.NoError(t, err)
	}
	_, err = exec.Fire(bg, state.Pending, "")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	_, err = exec.Fire(bg, state.Stopping, "")
	require.ErrorIs(t, err, transition.ErrGuard)

	// Another writer moves the record behind exec's back; with no retries
	// exec's next write is a conflict.
	master, err := transition.NewPersisted(guarded, store, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, _, err = master.Apply(bg, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
		return transition.To(cur).Set("note", "x"), nil
	})
	require.NoError(t, err)
	_, err = exec.Fire(bg, state.Failing, "")
	require.ErrorIs(t, err, storage.ErrConflict)

	// An owner whose ownership ended is fenced.
	_, _, err = exec.Acquire(bg, storage.Lease{Holder: "pod-a", TTL: time.Minute}, nil)
	require.NoError(t, err)
	require.NoError(t, exec.Ownership().Release(bg))
	_, err = exec.Fire(bg, state.Relocating, "")
	require.ErrorIs(t, err, storage.ErrFenced)

	// A done context is an error.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = exec.Fire(ctx, state.Completed, "")
	require.ErrorIs(t, err, context.Canceled)

	golden(t, m, "transitions", "execfsm_transitions_total")
}

// Startup decisions, SIGTERM actions, restarts, spent budgets and
// enforced deadlines, counted from what the recovery helpers carried out.
func TestRecoveryDecisionsAreCounted(t *testing.T) {
	m := prom.New()
	obs, err := prom.RecoveryObserver(m, teraslice.Lifecycle())
	require.NoError(t, err)
	store := storage.NewMemory()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	policy := func() recovery.Policy {
		return recovery.Policy{Clock: func() time.Time { return now }, Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}
	}

	// One execution crash-loops: three resumes, then its budget is spent,
	// then it is refused.
	execution(t, store, "ex-loop", state.Running, transition.PersistedOptions{Clock: clock})
	controller := func(id string) *transition.Persisted[state.Status] {
		c, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Clock: clock})
		require.NoError(t, err)
		return c
	}
	for k := range 5 {
		now = now.Add(time.Second)
		looping := controller("ex-loop")
		_, _ = decider(t, teraslice.Roles(), policy()).WithObserver(obs).Start(bg, looping, storage.Lease{Holder: fmt.Sprintf("pod-%d", k), TTL: time.Minute})
		if own := looping.Ownership(); own != nil {
			require.NoError(t, own.Release(bg))
		}
	}
	// One starts fresh, then is relocated by SIGTERM; its successor
	// resumes it; a live holder refuses a third.
	execution(t, store, "ex-fresh", state.Initializing, transition.PersistedOptions{Clock: clock})
	owned := controller("ex-fresh")
	_, err = decider(t, teraslice.Roles(), policy()).WithObserver(obs).Start(bg, owned, storage.Lease{Holder: "pod-a", TTL: time.Minute})
	require.NoError(t, err)
	_, err = owned.Fire(bg, state.Running, "")
	require.NoError(t, err)
	a, err := decider(t, teraslice.Roles(), policy()).WithObserver(obs).Terminate(bg, owned, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	successor := controller("ex-fresh")
	_, err = decider(t, teraslice.Roles(), policy()).WithObserver(obs).Start(bg, successor, storage.Lease{Holder: "pod-b", TTL: time.Minute})
	require.NoError(t, err)
	_, err = decider(t, teraslice.Roles(), policy()).WithObserver(obs).Start(bg, controller("ex-fresh"), storage.Lease{Holder: "pod-c", TTL: time.Minute})
	require.ErrorIs(t, err, storage.ErrHeld)
	// The successor is told to shut down while the master stops it.
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-fresh", transition.PersistedOptions{Clock: clock})
	require.NoError(t, err)
	_, err = master.Fire(bg, state.Stopping, "user stop")
	require.NoError(t, err)
	a, err = decider(t, teraslice.Roles(), policy()).WithObserver(obs).Terminate(bg, successor, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionShutdown, a.Kind)

	// A relocation nobody took over is reaped at its deadline.
	entered := now.Add(-teraslice.RelocatingDeadline - time.Minute)
	execution(t, store, "ex-stuck", state.Relocating, transition.PersistedOptions{Clock: func() time.Time { return entered }})
	reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).WithObserver(obs).NewReaper(store, recovery.ReaperOptions{Clock: reconciletest.NewClock(now)})
	require.NoError(t, err)
	for _, id := range []string{"ex-stuck", "ex-stuck", "ex-loop"} {
		_, err = reaper.Reconcile(bg, id)
		require.NoError(t, err)
	}

	golden(t, m, "recovery", "execfsm_startup_decisions_total", "execfsm_sigterm_actions_total",
		"execfsm_failovers_total", "execfsm_failovers_spent_total", "execfsm_enforced_moves_total")
}

// A Loop's calls are counted under controller-runtime's names and labels,
// with its buckets, and its queue depth is read at each scrape.
func TestLoopIsCountedUnderControllerRuntimesNames(t *testing.T) {
	m := prom.New()
	obs, err := prom.ReconcileObserver[string](m, "executions")
	require.NoError(t, err)
	recObs, err := prom.AdoptionObserver[string](m, "executions")
	require.NoError(t, err)
	calls := map[string]int{}
	l, err := reconcile.NewLoop(reconcile.Options[string]{
		Reconciler: reconcile.ReconcilerFunc[string](func(_ context.Context, key string) (reconcile.Result, error) {
			calls[key]++ // one worker: no race
			switch {
			case key == "fails" && calls[key] == 1:
				return reconcile.Result{}, errors.New("store unreachable")
			case key == "broken":
				return reconcile.Result{}, reconcile.TerminalError(errors.New("no such table"))
			case key == "panics" && calls[key] == 1:
				panic("bug")
			case key == "polls" && calls[key] == 1:
				return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
			}
			return reconcile.Result{}, nil
		}),
		World: func(context.Context) ([]reconcile.Item[string], error) {
			return []reconcile.Item[string]{{Key: "ok"}, {Key: "fails"}, {Key: "broken"}, {Key: "panics"}, {Key: "polls"}}, nil
		},
		Resync:            -1,
		Backoff:           &reconcile.Backoff{Base: time.Nanosecond, Max: time.Nanosecond},
		ReconcileObserver: obs,
		AdoptionObserver:  recObs,
		Clock:             ticking{new(atomic.Int64)},
	})
	require.NoError(t, err)
	require.NoError(t, prom.WatchQueue(m, "executions", l))
	require.ErrorContains(t, prom.WatchQueue(m, "executions", l), "watched already")
	l.Add("waiting-1", "waiting-2") // before Run: the depth shows them
	golden(t, m, "queue-before", "workqueue_depth")

	reconciletest.Start(t, l)
	reconciletest.Idle(t, l)
	golden(t, m, "loop", "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"controller_runtime_terminal_reconcile_errors_total", "controller_runtime_reconcile_panics_total",
		"workqueue_retries_total", "workqueue_depth",
		"execfsm_adoption_adopted_total", "execfsm_adoption_gone_total", "execfsm_adoption_errors_total")

	// The histogram: controller-runtime's buckets, one sample per call,
	// every one in the first bucket (its sum depends on the clock's reads).
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(m))
	families, err := reg.Gather()
	require.NoError(t, err)
	var found bool
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		found = true
		require.Len(t, f.GetMetric(), 1)
		h := f.GetMetric()[0].GetHistogram()
		require.Equal(t, l.Stats().Reconciles, h.GetSampleCount())
		var bounds []float64
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
			require.Equal(t, h.GetSampleCount(), b.GetCumulativeCount())
		}
		require.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
			1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}, bounds)
		require.Equal(t, "executions", f.GetMetric()[0].GetLabel()[0].GetValue())
	}
	require.True(t, found, "controller_runtime_reconcile_time_seconds is exported")
}

// ticking is a clock (reconcile.Clock) that moves a nanosecond each time
// it is read, and whose timers fire at once: retries come due at once and
// every reconcile takes nanoseconds, inside the histogram's first bucket.
type ticking struct{ n *atomic.Int64 }

var epoch = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func (c ticking) Now() time.Time { return epoch.Add(time.Duration(c.n.Add(1))) }
func (c ticking) NewTimer(time.Duration) reconcile.Timer {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return firedTimer{ch}
}

type firedTimer struct{ c chan time.Time }

func (t firedTimer) C() <-chan time.Time { return t.c }
func (t firedTimer) Stop() bool          { return false }

// eventually polls cond until it holds, failing t after bound.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, bound, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// corruptOne plays a store holding one record it cannot read (as a
// damaged bbolt page or a newer version's format would), around a real
// Memory store.
type corruptOne struct {
	*storage.Memory
	id string
}

func (c corruptOne) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	recs, bad, err := c.Memory.List(ctx)
	return recs, append(bad, storage.Unreadable{ID: c.id, Err: storage.ErrCorrupt}), err
}

func (c corruptOne) Get(ctx context.Context, id string) (storage.Record, error) {
	if id == c.id {
		return storage.Record{}, fmt.Errorf("%s: %w", id, storage.ErrCorrupt)
	}
	return c.Memory.Get(ctx, id)
}

// The executions by status: every status of the table, zeros included,
// listed first, then kept from the store's watch.
func TestStatusesFollowTheStore(t *testing.T) {
	m := prom.New()
	mem := storage.NewMemory()
	store := corruptOne{mem, "ex-damaged"}
	execution(t, mem, "ex-1", state.Running, transition.PersistedOptions{})
	execution(t, mem, "ex-2", state.Running, transition.PersistedOptions{})
	moving := execution(t, mem, "ex-3", state.Running, transition.PersistedOptions{})
	statuses, err := prom.NewStatuses(m, teraslice.Lifecycle(), store, func(err error) { t.Errorf("store error: %v", err) })
	require.NoError(t, err)
	require.Zero(t, testutil.CollectAndCount(m, "execfsm_executions"), "nothing before the first List")

	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- statuses.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(bound):
			t.Fatal("Run did not return after its context was cancelled")
		}
	}()
	expect := func(file string) {
		t.Helper()
		want, err := os.ReadFile(filepath.Join("testdata", file+".prom"))
		require.NoError(t, err)
		eventually(t, "the gauge to read "+file, func() error {
			return testutil.CollectAndCompare(m, strings.NewReader(string(want)), "execfsm_executions", "execfsm_unreadable_records")
		})
	}
	if *update {
		eventually(t, "the first List", func() error {
			if testutil.CollectAndCount(m, "execfsm_executions") == 0 {
				return errors.New("not listed")
			}
			return nil
		})
		golden(t, m, "statuses-listed", "execfsm_executions", "execfsm_unreadable_records")
	}
	expect("statuses-listed")

	_, err = moving.Fire(bg, state.Relocating, "SIGTERM")
	require.NoError(t, err)
	execution(t, mem, "ex-4", state.Pending, transition.PersistedOptions{})
	if *update {
		time.Sleep(100 * time.Millisecond)
		golden(t, m, "statuses-watched", "execfsm_executions", "execfsm_unreadable_records")
	}
	expect("statuses-watched")
}

func TestConstructorsRefuseMissingParts(t *testing.T) {
	m := prom.New()
	_, err := prom.NewTransitions[state.Status](nil, teraslice.Lifecycle())
	require.Error(t, err)
	_, err = prom.NewTransitions[state.Status](m, nil)
	require.Error(t, err)
	_, err = prom.RecoveryObserver[state.Status](m, nil)
	require.Error(t, err)
	_, err = prom.ReconcileObserver[string](m, "")
	require.Error(t, err)
	_, err = prom.AdoptionObserver[string](nil, "x")
	require.Error(t, err)
	require.Error(t, prom.WatchQueue[string](m, "x", nil))
	_, err = prom.NewStatuses[state.Status](m, teraslice.Lifecycle(), nil, nil)
	require.Error(t, err)
	_, err = prom.RunObservers[state.Status](m, teraslice.Roles(), "")
	require.Error(t, err)
	_, err = prom.RunObservers[state.Status](m, nil, "x")
	require.Error(t, err)
}

// One call makes every observer of the harness: a manager's moves,
// decisions, syncs and adoptions are all counted.
func TestRunObserversCountAManagersWholeLife(t *testing.T) {
	m := prom.New()
	observers, err := prom.RunObservers(m, teraslice.Roles(), "farm")
	require.NoError(t, err)
	store := storage.NewMemory()
	execution(t, store, "ex-1", state.Initializing, transition.PersistedOptions{Actor: "master"})
	signals, done := make(chan os.Signal, 1), make(chan error, 1)
	go func() {
		_, err := run.Manage(bg, run.ManagerConfig[state.Status]{
			Roles: teraslice.Roles(), Store: store, Holder: "farm-a", Platform: recovery.KubernetesJob, Resumable: true,
			Signals: signals, Resync: -1, Observers: observers,
			World: func(context.Context) ([]reconcile.Item[string], error) {
				return []reconcile.Item[string]{{Key: "ex-1"}}, nil
			},
			Sync: func(ctx context.Context, exec *transition.Persisted[state.Status], s state.Status) (run.Step, error) {
				if s == state.Initializing {
					_, err := exec.Fire(ctx, state.Running, "set up")
					return run.Step{}, err
				}
				return run.End(recovery.Ending{Finished: true}), nil
			},
		})
		done <- err
	}()
	completed := func() bool { rec, err := store.Get(bg, "ex-1"); return err == nil && rec.Status == "completed" }
	require.Eventually(t, completed, bound, time.Millisecond)
	signals <- syscall.SIGTERM
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(bound):
		t.Fatal("Manage did not return after SIGTERM")
	}
	text, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "execfsm_transitions_total",
		"execfsm_startup_decisions_total", "controller_runtime_reconcile_total", "execfsm_adoption_adopted_total")
	require.NoError(t, err)
	for _, want := range []string{
		`execfsm_transitions_total{from="initializing",result="done",to="running"} 1`,
		`execfsm_transitions_total{from="running",result="done",to="completed"} 1`,
		`execfsm_startup_decisions_total{decision="start",result="ok"} 1`,
		`controller_runtime_reconcile_total{controller="farm",result="success"}`,
		`execfsm_adoption_adopted_total{controller="farm"} 1`,
	} {
		require.Contains(t, string(text), want)
	}
}

// Scraped over HTTP on 127.0.0.1 through promhttp, as Prometheus does:
// the registry takes the Metrics, and the page carries every family fed.
func TestScrapedOverHTTP(t *testing.T) {
	m := prom.New()
	reg := prometheus.NewPedanticRegistry() // also checks the descriptions are consistent
	require.NoError(t, reg.Register(m))
	require.Error(t, reg.Register(prom.New()), "a second Metrics in one registry collides")

	counts, err := prom.NewTransitions(m, teraslice.Lifecycle())
	require.NoError(t, err)
	exec := execution(t, storage.NewMemory(), "ex-1", state.Pending, transition.PersistedOptions{}, counts.Observers())
	_, err = exec.Fire(bg, state.Scheduling, "")
	require.NoError(t, err)
	_, err = exec.Fire(bg, state.Completed, "")
	require.Error(t, err)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), srv.URL)
	client := &http.Client{Timeout: bound}
	resp, err := client.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	page := string(body)
	require.Contains(t, page, `execfsm_transitions_total{from="pending",result="done",to="scheduling"} 1`)
	require.Contains(t, page, `execfsm_transitions_total{from="scheduling",result="not_allowed",to="completed"} 1`)
	require.Contains(t, page, "# TYPE execfsm_transitions_total counter")
}

// decider is the Decider of roles and p, for a test.
func decider[S comparable](t testing.TB, roles *recovery.Roles[S], p recovery.Policy) *recovery.Decider[S] {
	t.Helper()
	d, err := recovery.NewDecider(roles, p)
	require.NoError(t, err)
	return d
}

// A tool reading the table recorded in the store labels by it: a record
// in a status that table does not know is "unknown", never a label of its
// own (the label's values stay the table's).
func TestStatusesOutsideTheRecordedTableAreUnknown(t *testing.T) {
	store := storage.NewMemory()
	_, err := schema.Save(bg, store, "teraslice", teraslice.Roles())
	require.NoError(t, err)
	execution(t, store, "ex-1", state.Running, transition.PersistedOptions{})
	foreign := storagetest.Sample("ex-2")
	foreign.Status = "draining" // another table's
	_, err = store.Create(bg, foreign)
	require.NoError(t, err)

	recorded, err := schema.Load(bg, store)
	require.NoError(t, err)
	table, _, err := recorded.Rebuild()
	require.NoError(t, err)
	m := prom.New()
	statuses, err := prom.NewStatuses(m, table, store, func(err error) { t.Errorf("store error: %v", err) })
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- statuses.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the recorded table's labels", func() error {
		want := "# HELP execfsm_executions Executions by status, as the store holds them (every status of the table, zero included).\n# TYPE execfsm_executions gauge\n"
		for _, s := range table.States() {
			n := 0
			if s == "running" {
				n = 1
			}
			want += fmt.Sprintf("execfsm_executions{status=%q} %d\n", s, n)
		}
		want += "execfsm_executions{status=\"unknown\"} 1\n"
		return testutil.CollectAndCompare(m, strings.NewReader(want), "execfsm_executions")
	})
}

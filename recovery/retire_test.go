package recovery_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/archive"
	"github.com/execfsm/execfsm/reconcile/reconciletest"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// renderRoles is a render job's lifecycle keeping completed jobs a day
// and failed ones a month, for their post-mortem; cancelled ones fall
// under the first Retain, which names no state.
func renderRoles(t testing.TB) *recovery.Roles[string] {
	t.Helper()
	roles, err := recovery.DefineLifecycle(transition.New("queued")).
		NotStarted("queued").Running("rendering").Relocating("moving", "queued").
		Stopping("cancelling", "cancelled").Failed("failed").Ends("done", "cancelled").
		Retain(time.Hour).Retain(24*time.Hour, "done").Retain(720*time.Hour, "failed").
		Build()
	require.NoError(t, err)
	return roles
}

func TestRetainGivesEachTerminalStateItsTime(t *testing.T) {
	roles := renderRoles(t)
	for s, want := range map[string]time.Duration{"done": 24 * time.Hour, "failed": 720 * time.Hour, "cancelled": time.Hour} {
		got, ok := roles.Retention(s)
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"queued", "rendering", "moving", "cancelling"} {
		_, ok := roles.Retention(s)
		require.False(t, ok, "%s has not ended: never retired", s)
	}

	kept, err := recovery.DefineLifecycle(transition.New("queued")).
		NotStarted("queued").Running("rendering").Failed("failed").Ends("done", "cancelled").
		Retain(0, "done").Build()
	require.NoError(t, err)
	after, ok := kept.Retention("done")
	require.True(t, ok)
	require.Zero(t, after, "zero keeps nothing: retired as soon as it ends")
	_, ok = kept.Retention("failed")
	require.False(t, ok, "no Retain covers it: kept for ever")
}

func TestRetainRefusesWhatCannotBeRetired(t *testing.T) {
	_, err := recovery.DefineLifecycle(transition.New("queued")).
		NotStarted("queued").Running("rendering").Failed("failed").Ends("done", "cancelled").
		Retain(time.Hour, "rendering").Retain(time.Hour, "done").Retain(2*time.Hour, "done").
		Retain(-time.Second, "failed").Retain(time.Hour).Retain(time.Minute).Retain(time.Hour, "nowhere").
		Build()
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	for _, want := range []string{
		`Retain for "rendering", a running state`,
		`Retain for "done" is given twice`,
		`Retain -1s is negative`,
		`Retain without states is given 2 times`,
		`Retain for "nowhere", not a state of the table`,
	} {
		require.ErrorContains(t, err, want)
	}
}

// fleetOf creates one execution per status given, each having entered
// it at the time given, in a fresh store.
func fleetOf(t *testing.T, roles *recovery.Roles[string], at map[string]time.Time, statuses map[string]string) *storage.Memory {
	t.Helper()
	store := storage.NewMemory()
	for id, status := range statuses {
		entered := at[id]
		exec, err := transition.NewPersisted(roles.Table(), store, id, transition.PersistedOptions{Actor: "master",
			Clock: func() time.Time { return entered }})
		require.NoError(t, err)
		_, err = exec.Create(context.Background(), transition.To("queued").Because("submitted"))
		require.NoError(t, err)
		if status != "queued" {
			_, err = exec.Walk(context.Background(), status, "the test's")
			require.NoError(t, err)
		}
	}
	return store
}

// A pass retires what is past its retention, archived first, and keeps
// the rest: live executions, ended ones not yet due, and says when the
// first of those falls due.
func TestARetirerDeletesWhatIsPastItsRetentionAndArchivesItFirst(t *testing.T) {
	roles := renderRoles(t)
	clock := reconciletest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	at := map[string]time.Time{
		"done-old": now.Add(-25 * time.Hour), "done-new": now.Add(-23 * time.Hour),
		"failed-old": now.Add(-721 * time.Hour), "failed-week": now.Add(-7 * 24 * time.Hour),
		"cancelled-old": now.Add(-2 * time.Hour), "rendering-old": now.Add(-1000 * time.Hour),
		"queued-old": now.Add(-1000 * time.Hour),
	}
	store := fleetOf(t, roles, at, map[string]string{
		"done-old": "done", "done-new": "done", "failed-old": "failed", "failed-week": "failed",
		"cancelled-old": "cancelled", "rendering-old": "rendering", "queued-old": "queued",
	})
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	kept, err := archive.Open(path)
	require.NoError(t, err)
	defer kept.Close()
	var told []recovery.RetireReport
	d := decider(t, roles, recovery.Policy{Work: recovery.AsRecorded}).WithObserver(recovery.Observer[string]{
		Retired: func(r recovery.RetireReport, err error) {
			require.NoError(t, err)
			told = append(told, r)
		}})
	retirer, err := d.NewRetirer(store, recovery.RetirerOptions{Clock: clock, Archive: kept, Batch: 2})
	require.NoError(t, err)

	report, err := retirer.Retire(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, report.Retired)
	require.Equal(t, 2, report.Kept)
	require.Equal(t, now.Add(time.Hour), report.NextDue, "done-new falls due first")
	require.Equal(t, []recovery.RetireReport{report}, told)

	recs, _, err := store.List(context.Background())
	require.NoError(t, err)
	var left []string
	for _, rec := range recs {
		left = append(left, rec.ID)
	}
	require.ElementsMatch(t, []string{"done-new", "failed-week", "rendering-old", "queued-old"}, left)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rd := archive.NewReader(f)
	reasons := map[string]string{}
	for {
		r, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		reasons[r.Record.ID] = r.Reason
		require.Positive(t, r.Record.History.Len(), "the trail came along")
	}
	require.Equal(t, map[string]string{"done-old": "done, kept 24h0m0s", "failed-old": "failed, kept 720h0m0s",
		"cancelled-old": "cancelled, kept 1h0m0s"}, reasons)
}

// An archive that fails stops the pass before anything it did not keep
// is deleted.
func TestARetirerWhoseArchiveFailsDeletesNothing(t *testing.T) {
	roles := renderRoles(t)
	clock := reconciletest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	store := fleetOf(t, roles, map[string]time.Time{"ex-1": clock.Now().Add(-48 * time.Hour)}, map[string]string{"ex-1": "done"})
	full := errors.New("disk full")
	retirer, err := decider(t, roles, recovery.Policy{Work: recovery.AsRecorded}).
		NewRetirer(store, recovery.RetirerOptions{Clock: clock, Archive: failingArchive{full}, Batch: 10})
	require.NoError(t, err)
	report, err := retirer.Retire(context.Background())
	require.ErrorIs(t, err, full)
	require.Zero(t, report.Retired)
	_, err = store.Get(context.Background(), "ex-1")
	require.NoError(t, err, "nothing deleted")
}

// failingArchive is an archive this test plays: one whose disk is full.
type failingArchive struct{ err error }

func (a failingArchive) Keep(context.Context, []storage.Retired) error { return a.err }

// A record held by a live controller, or moved on since the listing, is
// skipped, not deleted; Keep keeps what the caller says to keep.
func TestARetirerSkipsWhatIsHeldOrKept(t *testing.T) {
	roles := renderRoles(t)
	clock := reconciletest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	old := clock.Now().Add(-48 * time.Hour)
	store := fleetOf(t, roles, map[string]time.Time{"held": old, "listed": old, "plain": old},
		map[string]string{"held": "done", "listed": "done", "plain": "done"})
	own, _, err := store.Acquire(context.Background(), "held", storage.Lease{Holder: "pod-a", TTL: time.Minute})
	require.NoError(t, err)
	defer own.Release(context.Background())
	retirer, err := decider(t, roles, recovery.Policy{Work: recovery.AsRecorded}).NewRetirer(store,
		recovery.RetirerOptions{Clock: clock, Batch: 10, Keep: func(rec storage.Record) bool { return rec.ID == "listed" }})
	require.NoError(t, err)
	report, err := retirer.Retire(context.Background())
	require.NoError(t, err)
	require.Equal(t, recovery.RetireReport{Retired: 1, Skipped: 1, Kept: 1}, report)
	for _, id := range []string{"held", "listed"} {
		_, err := store.Get(context.Background(), id)
		require.NoError(t, err, id)
	}
}

// A store that lists only whole is read whole, and retired from alike.
func TestARetirerOverAStoreThatListsOnlyWhole(t *testing.T) {
	roles := renderRoles(t)
	clock := reconciletest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	old := clock.Now().Add(-48 * time.Hour)
	store := fleetOf(t, roles, map[string]time.Time{"ex-1": old, "ex-2": old}, map[string]string{"ex-1": "done", "ex-2": "rendering"})
	retirer, err := decider(t, roles, recovery.Policy{Work: recovery.AsRecorded}).NewRetirer(wholeStore{store}, recovery.RetirerOptions{Clock: clock, Batch: 10})
	require.NoError(t, err)
	report, err := retirer.Retire(context.Background())
	require.NoError(t, err)
	require.Equal(t, recovery.RetireReport{Retired: 1}, report)
}

// wholeStore is a store of a user's that deletes and lists only whole.
type wholeStore struct{ *storage.Memory }

func (s wholeStore) ListPage() {} // hides Memory's: not a storage.PageLister

func TestNewRetirerRefusesWhatCannotRetire(t *testing.T) {
	d := decider(t, renderRoles(t), recovery.Policy{Work: recovery.AsRecorded})
	_, err := d.NewRetirer(storage.NewMemory(), recovery.RetirerOptions{})
	require.ErrorIs(t, err, recovery.ErrInvalidPolicy)
	require.ErrorContains(t, err, "Batch 0")
	_, err = d.NewRetirer(struct{ storage.Store }{storage.NewMemory()}, recovery.RetirerOptions{Batch: 1})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = d.NewRetirer(nil, recovery.RetirerOptions{Batch: 1})
	require.Error(t, err)
}

// Run makes passes until its context ends, waking when the first kept
// record falls due rather than a whole interval later.
func TestARetirerRunsUntilItsContextEnds(t *testing.T) {
	roles := renderRoles(t)
	clock := reconciletest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	store := fleetOf(t, roles, map[string]time.Time{"ex-1": clock.Now().Add(-23 * time.Hour)}, map[string]string{"ex-1": "done"})
	passes := make(chan recovery.RetireReport, 16)
	d := decider(t, roles, recovery.Policy{Work: recovery.AsRecorded}).WithObserver(recovery.Observer[string]{
		Retired: func(r recovery.RetireReport, _ error) { passes <- r }})
	retirer, err := d.NewRetirer(store, recovery.RetirerOptions{Clock: clock, Batch: 10})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- retirer.Run(ctx, 24*time.Hour) }()
	first := recvReport(t, passes)
	require.Equal(t, 1, first.Kept)
	clock.WaitTimers(t, 1)
	clock.Advance(time.Hour) // ex-1 falls due an hour on, not a day
	second := recvReport(t, passes)
	require.Equal(t, 1, second.Retired)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func recvReport(t *testing.T, ch <-chan recovery.RetireReport) recovery.RetireReport {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no pass of the Retirer within 10s")
		return recovery.RetireReport{}
	}
}

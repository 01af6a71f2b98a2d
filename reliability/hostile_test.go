package reliability_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

func manyMeta(n, valueLen int) map[string]string {
	m := map[string]string{}
	for k := range n {
		m[fmt.Sprintf("k%03d", k)] = strings.Repeat("v", valueLen)
	}
	return m
}

// Every hostile write, on every store, gets an error matching
// ErrInvalidRecord and leaves the record exactly as it was.
func TestHostileWritesAreRefusedOnEveryStoreAndNothingIsWritten(t *testing.T) {
	megabyte := strings.Repeat("x", 1<<20)
	updates := map[string]transition.Update[state.Status]{
		"1 MB reason":                  {To: state.Scheduling, Reason: megabyte},
		"reason one byte too long":     {To: state.Scheduling, Reason: strings.Repeat("r", storage.MaxReasonLen+1)},
		"invalid UTF-8 reason":         {To: state.Scheduling, Reason: "ok \xc3\x28 not"},
		"huge metadata value":          {To: state.Scheduling, Meta: map[string]string{"k": megabyte}},
		"too many metadata entries":    {To: state.Scheduling, Meta: manyMeta(storage.MaxMetaEntries+1, 1)},
		"invalid UTF-8 metadata key":   {To: state.Scheduling, Meta: map[string]string{"\xff": "v"}},
		"invalid UTF-8 metadata value": {To: state.Scheduling, Meta: map[string]string{"k": "\xfe"}},
		"empty metadata key":           {To: state.Scheduling, Meta: map[string]string{"": "v"}},
	}
	etcd, _ := etcdStore(t)
	for storeName, store := range map[string]storage.Store{
		"memory": storage.NewMemory(), "bolt": boltStore(t), "etcd": etcd,
	} {
		t.Run(storeName, func(t *testing.T) {
			createAll(t, store, []string{"ex-hostile"})
			exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-hostile", transition.PersistedOptions{})
			require.NoError(t, err)
			before, err := store.Get(context.Background(), "ex-hostile")
			require.NoError(t, err)
			for name, u := range updates {
				_, _, err := exec.Apply(context.Background(), func(state.Status, storage.Record) (transition.Update[state.Status], error) {
					return u, nil
				})
				require.ErrorIs(t, err, storage.ErrInvalidRecord, name)
				require.Less(t, len(err.Error()), 1024, "%s: the error does not repeat the input", name)
				after, err := store.Get(context.Background(), "ex-hostile")
				require.NoError(t, err)
				require.Equal(t, before.Revision, after.Revision, "%s: nothing written", name)
			}
			for name, l := range map[string]storage.Lease{
				"1 MB holder":          {Holder: megabyte, TTL: time.Minute},
				"invalid UTF-8 holder": {Holder: "pod-\xff", TTL: time.Minute},
				"1 MB reason":          {Holder: "pod", TTL: time.Minute, Reason: megabyte},
				"a TTL of 290 years":   {Holder: "pod", TTL: math.MaxInt64},
				"a negative TTL":       {Holder: "pod", TTL: -time.Second},
				"a TTL below a second": {Holder: "pod", TTL: time.Millisecond},
				"no holder":            {TTL: time.Minute},
			} {
				_, _, err := exec.Acquire(context.Background(), l, nil)
				require.ErrorIs(t, err, storage.ErrInvalidLease, name)
				require.Less(t, len(err.Error()), 1024, "%s: the error does not repeat the input", name)
				after, err := store.Get(context.Background(), "ex-hostile")
				require.NoError(t, err)
				require.Equal(t, before.Revision, after.Revision, "%s: nothing written", name)
			}
			// And the execution still works.
			_, err = exec.Fire(context.Background(), state.Scheduling, "fine")
			require.NoError(t, err)
		})
	}
}

// A record whose status this build does not know (written by a newer
// version, or by hand) is refused by everything that writes it, with an
// error naming the status, and is not overwritten; the Reaper leaves it
// to the controllers whose table knows it, without an error to retry.
func TestUnknownStatusInAStoredRecordIsRefusedAndLeftAlone(t *testing.T) {
	etcd, _ := etcdStore(t)
	for storeName, store := range map[string]storage.Store{
		"memory": storage.NewMemory(), "bolt": boltStore(t), "etcd": etcd,
	} {
		t.Run(storeName, func(t *testing.T) {
			stored, err := store.Create(context.Background(), storage.Record{ID: "ex-future", Status: "hibernating"})
			require.NoError(t, err)
			exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-future", transition.PersistedOptions{})
			require.NoError(t, err)
			_, err = exec.Fire(context.Background(), state.Failed, "clean up")
			require.ErrorIs(t, err, transition.ErrUnknownState)
			require.Contains(t, err.Error(), `"hibernating"`)
			_, err = decider(t, teraslice.Roles(), recovery.Policy{}).Start(context.Background(), exec, storage.Lease{Holder: "pod-a", TTL: time.Minute})
			require.ErrorIs(t, err, transition.ErrUnknownState)
			require.ErrorIs(t, err, recovery.ErrForeignStatus)
			_, err = recovery.Startup(teraslice.Roles(), after(t, store), recovery.Policy{}, time.Now())
			require.ErrorIs(t, err, transition.ErrUnknownState)
			// The start took nothing over, so a SIGTERM now leaves
			// without reading the record.
			a, err := decider(t, teraslice.Roles(), recovery.Policy{}).Terminate(context.Background(), exec, nil)
			require.NoError(t, err)
			require.Equal(t, recovery.ActionLeave, a.Kind)
			reaper, err := decider(t, teraslice.Roles(), recovery.Policy{}).NewReaper(store, recovery.ReaperOptions{})
			require.NoError(t, err)
			res, err := reaper.Reconcile(context.Background(), "ex-future")
			require.NoError(t, err, "left alone, not retried")
			require.Zero(t, res.RequeueAfter)
			after, err := store.Get(context.Background(), "ex-future")
			require.NoError(t, err)
			require.Equal(t, stored.Revision, after.Revision)
			require.Equal(t, "hibernating", after.Status)
		})
	}
}

// Negative and overflowing budgets, durations and sizes: each refused
// where it is given, with an error saying what is wrong.
func TestNegativeAndOverflowingSettingsAreRefused(t *testing.T) {
	rec := storage.Record{ID: "ex-1", Status: "running"}
	now := time.Now()
	for name, p := range map[string]recovery.Policy{
		"negative failovers":      {Failovers: recovery.Allowance{Count: -1}},
		"negative failover count": {Failovers: recovery.Allowance{Count: -1 << 62, Window: time.Hour}},
		"negative window":         {Failovers: recovery.Allowance{Count: 3, Window: -time.Hour}},
		"exit code above 255":     {Platform: recovery.Platform{Restart: recovery.RestartOnFailure, RelocateExitCode: 1 << 20}},
		"negative exit code":      {Platform: recovery.Platform{Restart: recovery.RestartOnFailure, RelocateExitCode: -1}},
	} {
		_, err := recovery.Startup(teraslice.Roles(), rec, p, now)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
		_, err = recovery.Terminate(teraslice.Roles(), rec, storage.Claim{}, p)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
		_, err = recovery.NewDecider(teraslice.Roles(), p)
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
	}
	// Negative and zero deadlines are refused where deadlines are given,
	// by RolesBuilder.Deadline's Build (recovery's roles tests).
	noop := reconcile.ReconcilerFunc[string](func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	for name, opt := range map[string]reconcile.Options[string]{
		"negative workers":     {Reconciler: noop, Workers: -1},
		"overflowing workers":  {Reconciler: noop, Workers: 1 << 40},
		"negative backoff":     {Reconciler: noop, Backoff: &reconcile.Backoff{Base: -time.Second, Max: time.Second}},
		"negative backoff max": {Reconciler: noop, Backoff: &reconcile.Backoff{Base: time.Second, Max: -1}},
		"negative jitter":      {Reconciler: noop, Backoff: &reconcile.Backoff{Base: 1, Max: 2, Jitter: -0.5}},
		"overflowing jitter":   {Reconciler: noop, Backoff: &reconcile.Backoff{Base: 1, Max: 2, Jitter: 1e300}},
	} {
		_, err := reconcile.NewLoop(opt)
		require.Error(t, err, name)
	}
	for name, opt := range map[string]transition.PersistedOptions{
		"negative history":    {History: -1},
		"overflowing history": {History: 1 << 40},
		"negative retries":    {Retries: -2},
		"overflowing retries": {Retries: 1 << 40},
		"1 MB actor":          {Actor: strings.Repeat("a", 1<<20)},
	} {
		_, err := transition.NewPersisted(teraslice.Lifecycle(), storage.NewMemory(), "ex-1", opt)
		require.Error(t, err, name)
	}
	_, err := boltstore.Open(filepath.Join(t.TempDir(), "db"), boltstore.Options{Timeout: -time.Second})
	require.ErrorContains(t, err, "negative Timeout")
	_, err = boltstore.Open(filepath.Join(t.TempDir(), "db"), boltstore.Options{LogSize: -1})
	require.ErrorContains(t, err, "negative LogSize")
	cl, err := shared.Client()
	require.NoError(t, err)
	defer cl.Close()
	_, err = etcdstore.New(cl, etcdstore.Options{Timeout: -time.Second})
	require.ErrorContains(t, err, "negative Timeout")
}

func after(t *testing.T, store storage.Store) storage.Record {
	t.Helper()
	rec, err := store.Get(context.Background(), "ex-future")
	require.NoError(t, err)
	return rec
}

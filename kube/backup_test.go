package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// An export taken while four writers go on, imported into a store of
// another namespace, is the store at the export's revision: every record
// and trail equal to the last write acknowledged by then (at a revision
// of the new store); a controller takes one over and recovers.
func TestAnExportUnderLoadImportsAsTheStoreAtItsRevision(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	history := map[string][]storagetest.Written{}
	writing, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for k := 0; writing.Err() == nil; k++ {
				id := fmt.Sprintf("ex-%d-%d", w, k%4)
				written, err := storagetest.Churn(ctx, s, id, k)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				history[id] = append(history[id], written)
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second) // the writers under way
	var exported bytes.Buffer
	info, err := s.Export(ctx, &exported)
	require.NoError(t, err)
	require.Empty(t, info.Unreadable)
	time.Sleep(200 * time.Millisecond) // and after it
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	restored := newStore(t) // a namespace of its own
	n, err := restored.Import(ctx, &exported)
	require.NoError(t, err)
	require.Equal(t, info.Records, n)
	want := storagetest.AsOf(history, info.ResourceVersion)
	require.NotEmpty(t, want)
	recs, bad, err := restored.List(ctx)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, len(want))
	for _, got := range recs {
		expected := want[got.ID]
		expected.Revision, got.Revision = 0, 0 // the new store's
		require.Equal(t, encodedRecord(t, expected), encodedRecord(t, got), "%s as of revision %d", got.ID, info.ResourceVersion)
	}
	_, err = restored.Import(ctx, bytes.NewReader(nil))
	require.NoError(t, err, "an empty export imports nothing")

	exec, err := transition.NewPersisted(teraslice.Lifecycle(), restored, recs[0].ID, transition.PersistedOptions{Actor: "pod-b"})
	require.NoError(t, err)
	d, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	require.NoError(t, err)
	v, err := d.Start(ctx, exec, storage.Lease{Holder: "pod-b", TTL: 5 * time.Second})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision, "a running execution whose controller died resumes: %s", v.Reason)
	require.NoError(t, exec.Ownership().Release(ctx))
}

// encodedRecord is rec as a store writes it: two records that encode
// alike are the same record, trail and all.
func encodedRecord(t *testing.T, rec storage.Record) string {
	t.Helper()
	data, err := rec.EncodeJSON()
	require.NoError(t, err)
	return string(data)
}

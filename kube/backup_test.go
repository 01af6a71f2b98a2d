package kube_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/storage/storagetest"
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
	load := storagetest.StartLoad(s, 4, 4)
	time.Sleep(time.Second) // the writers under way
	var exported bytes.Buffer
	info, err := s.Export(ctx, &exported)
	require.NoError(t, err)
	require.Empty(t, info.Unreadable)
	time.Sleep(200 * time.Millisecond) // and after it
	history := load.Stop(t)

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
		require.Equal(t, storagetest.Encoded(t, expected), storagetest.Encoded(t, got), "%s as of revision %d", got.ID, info.ResourceVersion)
	}
	_, err = restored.Import(ctx, bytes.NewReader(nil))
	require.NoError(t, err, "an empty export imports nothing")

	recoverytest.ResumesAfterRestore(t, restored, recs[0].ID)
}

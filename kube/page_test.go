package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// A status too long for a label has none to select by: its pages are
// filtered by the store instead, and hold its records all the same.
func TestAStatusNoLabelHoldsIsFilteredByTheStore(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	long := "waiting-for-" + strings.Repeat("the-reviewers-", 5)
	require.Greater(t, len(long), 63)
	for k := range 5 {
		rec := storagetest.Sample(fmt.Sprintf("ex-%d", k))
		if k%2 == 0 {
			rec.Status = long
		}
		_, err := s.Create(ctx, rec)
		require.NoError(t, err)
	}
	recs, bad, err := storage.ListAll(ctx, s, 2, long)
	require.NoError(t, err)
	require.Empty(t, bad)
	var ids []string
	for _, rec := range recs {
		ids = append(ids, rec.ID)
	}
	require.Equal(t, []string{"ex-0", "ex-2", "ex-4"}, ids)
}

// A cursor is the API server's continue token, which it stops honouring
// once etcd has compacted its revision (every second in these tests):
// ListPage says so, matching ErrInvalidQuery, and the first page
// starts again.
func TestAnExpiredCursorIsAnInvalidQuery(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k := range 3 {
		_, err := s.Create(ctx, storagetest.Sample(fmt.Sprintf("ex-%d", k)))
		require.NoError(t, err)
	}
	first, err := s.ListPage(ctx, storage.Query{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, first.Next)
	var expired error
	require.Eventually(t, func() bool {
		// Writes move the revision on, so that compaction passes the
		// token's.
		_, err := s.Create(ctx, storagetest.Sample(fmt.Sprintf("ex-later-%d", time.Now().UnixNano())))
		require.NoError(t, err)
		_, expired = s.ListPage(ctx, storage.Query{Limit: 1, Cursor: first.Next})
		return expired != nil
	}, 30*time.Second, 200*time.Millisecond, "the continue token to expire with etcd's compaction")
	require.ErrorIs(t, expired, storage.ErrInvalidQuery)
	require.ErrorContains(t, expired, "start from the first page")
	_, err = s.ListPage(ctx, storage.Query{Limit: 1, Cursor: "not a token"})
	require.ErrorIs(t, err, storage.ErrInvalidQuery)
}

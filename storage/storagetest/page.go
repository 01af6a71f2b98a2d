package storagetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// pageTests check the contract of [storage.PageLister], for the stores
// that implement it.
var pageTests = []optionalTest[storage.PageLister]{
	{"PagesListEveryRecordOnceInOrder", pagesListEveryRecordOnce},
	{"AStatusFilterListsOnlyThoseStatuses", aStatusFilterListsOnlyThose},
	{"TheStatusIndexFollowsEveryWrite", theStatusIndexFollowsEveryWrite},
	{"AQueryNoStoreAnswersIsRefused", aQueryNoStoreAnswersIsRefused},
}

// withStatus is Sample(id) in status.
func withStatus(id, status string) storage.Record {
	rec := Sample(id)
	rec.Status = status
	return rec
}

// pages lists q page by page, failing on a page over q.Limit or a loop,
// and returns the ids listed and how many pages it took.
func pages(t *testing.T, l storage.PageLister, q storage.Query) ([]string, int) {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	for n := 1; ; n++ {
		require.LessOrEqual(t, n, 1000, "a thousand pages: the cursor goes round")
		page, err := l.ListPage(ctx(t), q)
		require.NoError(t, err)
		require.Empty(t, page.Unreadable)
		require.LessOrEqual(t, len(page.Records), q.Limit)
		for _, rec := range page.Records {
			require.False(t, seen[rec.ID], "%s listed twice", rec.ID)
			seen[rec.ID] = true
			ids = append(ids, rec.ID)
		}
		if page.Next == "" {
			return ids, n
		}
		require.Len(t, page.Records, q.Limit, "a page before the last is full")
		q.Cursor = page.Next
	}
}

func pagesListEveryRecordOnce(t *testing.T, s storage.Store, l storage.PageLister) {
	c := ctx(t)
	var want []string
	for k := range 25 {
		id := fmt.Sprintf("ex-%02d", k)
		_, err := s.Create(c, withStatus(id, []string{"running", "completed", "failed"}[k%3]))
		require.NoError(t, err)
		want = append(want, id)
	}
	ids, n := pages(t, l, storage.Query{Limit: 7})
	require.Equal(t, want, ids, "every record, once, in id order")
	require.Equal(t, 4, n)
	ids, n = pages(t, l, storage.Query{Limit: 25})
	require.Equal(t, want, ids)
	require.Equal(t, 1, n, "a page that holds everything is the last")
	page, err := l.ListPage(c, storage.Query{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	got, err := s.Get(c, "ex-00")
	require.NoError(t, err)
	require.Equal(t, got.Revision, page.Records[0].Revision, "records are listed as they are")
	require.Equal(t, got.History.Len(), page.Records[0].History.Len())
}

func aStatusFilterListsOnlyThose(t *testing.T, s storage.Store, l storage.PageLister) {
	c := ctx(t)
	want := map[string][]string{}
	for k := range 30 {
		id := fmt.Sprintf("ex-%02d", k)
		status := []string{"running", "completed", "failed", "relocating"}[k%4]
		_, err := s.Create(c, withStatus(id, status))
		require.NoError(t, err)
		want[status] = append(want[status], id)
	}
	ids, _ := pages(t, l, storage.Query{Statuses: []string{"running"}, Limit: 3})
	require.Equal(t, want["running"], ids)
	live, _ := pages(t, l, storage.Query{Statuses: []string{"relocating", "running", "running"}, Limit: 4})
	require.ElementsMatch(t, append(append([]string{}, want["running"]...), want["relocating"]...), live,
		"two statuses, one given twice: each record once")
	require.IsIncreasing(t, live, "merged in id order")
	none, n := pages(t, l, storage.Query{Statuses: []string{"stopped"}, Limit: 5})
	require.Empty(t, none)
	require.Equal(t, 1, n)
}

func theStatusIndexFollowsEveryWrite(t *testing.T, s storage.Store, l storage.PageLister) {
	c := ctx(t)
	listed := func(status string) []string {
		ids, _ := pages(t, l, storage.Query{Statuses: []string{status}, Limit: 10})
		return ids
	}
	a, err := s.Create(c, withStatus("ex-a", "running"))
	require.NoError(t, err)
	b, err := s.Create(c, withStatus("ex-b", "running"))
	require.NoError(t, err)
	require.Equal(t, []string{"ex-a", "ex-b"}, listed("running"))

	next := a
	next.Status = "completed"
	_, err = s.CompareAndSwap(c, "ex-a", a.Revision, next)
	require.NoError(t, err)
	require.Equal(t, []string{"ex-b"}, listed("running"), "a compare-and-swap moves it out")
	require.Equal(t, []string{"ex-a"}, listed("completed"), "and in")

	stale := a
	stale.Status = "failed"
	_, err = s.CompareAndSwap(c, "ex-a", a.Revision, stale)
	require.ErrorIs(t, err, storage.ErrConflict)
	require.Empty(t, listed("failed"), "a refused write moves nothing")

	lease := Lease("pod-a")
	lease.Move = &storage.Move{Revision: b.Revision, Status: "relocating", Meta: b.Meta}
	own, held, err := s.Acquire(c, "ex-b", lease)
	require.NoError(t, err)
	require.Equal(t, []string{"ex-b"}, listed("relocating"), "a take-over that moves moves it")
	require.Empty(t, listed("running"))
	require.NoError(t, own.Release(c))

	if d, ok := s.(storage.Deleter); ok {
		require.NoError(t, d.Delete(c, "ex-b", held.Revision))
		require.Empty(t, listed("relocating"), "a delete takes it out")
		_, err = s.Create(c, withStatus("ex-b", "failed"))
		require.NoError(t, err)
		require.Equal(t, []string{"ex-b"}, listed("failed"), "created again, in its new status")
	}
}

func aQueryNoStoreAnswersIsRefused(t *testing.T, _ storage.Store, l storage.PageLister) {
	for _, q := range []storage.Query{
		{Limit: 0},
		{Limit: storage.MaxPageLimit + 1},
		{Limit: 10, Statuses: []string{""}},
	} {
		_, err := l.ListPage(ctx(t), q)
		require.ErrorIs(t, err, storage.ErrInvalidQuery, "%+v", q)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.ListPage(done, storage.Query{Limit: 10})
	require.ErrorIs(t, err, context.Canceled)
}

// countTests check [storage.Counter], for the stores that implement it.
var countTests = []optionalTest[storage.Counter]{
	{"CountsFollowEveryWrite", countsFollowEveryWrite},
}

func countsFollowEveryWrite(t *testing.T, s storage.Store, counter storage.Counter) {
	c := ctx(t)
	count := func() map[string]int {
		got, err := counter.CountStatuses(c, "running", "completed", "failed")
		require.NoError(t, err)
		return got
	}
	require.Equal(t, map[string]int{"running": 0, "completed": 0, "failed": 0}, count())
	var recs []storage.Record
	for k := range 5 {
		rec, err := s.Create(c, withStatus(fmt.Sprintf("ex-%d", k), "running"))
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	next := recs[0]
	next.Status = "completed"
	_, err := s.CompareAndSwap(c, next.ID, recs[0].Revision, next)
	require.NoError(t, err)
	if d, ok := s.(storage.Deleter); ok {
		require.NoError(t, d.Delete(c, recs[1].ID, recs[1].Revision))
		require.Equal(t, map[string]int{"running": 3, "completed": 1, "failed": 0}, count())
	} else {
		require.Equal(t, map[string]int{"running": 4, "completed": 1, "failed": 0}, count())
	}
	_, err = counter.CountStatuses(c, "")
	require.ErrorIs(t, err, storage.ErrInvalidQuery)
}

package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// nextEvent reads one watch event or fails after a bound.
func nextEvent(t *testing.T, ch <-chan storage.WatchEvent) storage.WatchEvent {
	t.Helper()
	return storagetest.Recv(t, ch, "a watch event")
}

// drainUntilClosed reads ch until it is closed, failing after a bound,
// and returns what it read.
func drainUntilClosed(t *testing.T, ch <-chan storage.WatchEvent) []storage.WatchEvent {
	t.Helper()
	var got []storage.WatchEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("the watch channel was not closed (%d events read)", len(got))
		}
	}
}

// A watch whose reader stopped reading ends when the DB closes: its
// goroutine does not stay blocked on the reader, and nothing is delivered
// after Close.
func TestAStalledWatchEndsAtCloseAndDeliversNothingAfter(t *testing.T) {
	db, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
	for k := range 20 {
		_, err := s.Create(bg, storage.Record{ID: fmt.Sprint("ex-", k), Status: "running"})
		require.NoError(t, err)
	}
	ch, err := s.Watch(bg, 0)
	require.NoError(t, err)
	nextEvent(t, ch) // the reader takes one event, then stalls with 19 pending
	require.NoError(t, db.Close())
	require.Empty(t, drainUntilClosed(t, ch), "events delivered after Close")
}

// Tampered watch metadata: a "dropped" revision above the store's own
// would make every read of the log say "compacted", and the watch re-send
// the snapshot in a busy loop. Open raises the revision counter above it,
// so the watch sends the snapshot once and then the next write. A log key
// that is not a revision makes no event.
func TestTamperedWatchMetadataDoesNotLoopOrInventEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 6 {
		_, err := s.Create(bg, storage.Record{ID: fmt.Sprint("ex-", k), Status: "running"})
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	tamper(t, path, func(tx *bolt.Tx) error {
		ns := tx.Bucket([]byte("ns/executions"))
		if err := ns.Put([]byte("dropped"), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
			return err
		}
		return ns.Bucket([]byte("log")).Put([]byte{1, 2, 3}, []byte("ex-ghost"))
	})
	db, s = openStore(t, path, boltstore.Options{})
	defer db.Close()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch, err := s.Watch(ctx, 0)
	require.NoError(t, err)
	seen := map[string]bool{}
	for len(seen) < 6 {
		ev := nextEvent(t, ch)
		require.False(t, seen[ev.ID], "%s sent twice: the snapshot is being re-sent", ev.ID)
		require.NotEqual(t, "ex-ghost", ev.ID)
		seen[ev.ID] = true
	}
	rec, err := s.Create(bg, storage.Record{ID: "ex-new", Status: "running"})
	require.NoError(t, err)
	require.Equal(t, storage.WatchEvent{ID: "ex-new", Revision: rec.Revision}, nextEvent(t, ch), "the next event is the next write")
	cancel()
	drainUntilClosed(t, ch)
}

package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// frames counts the frames of a segment.
func frames(t *testing.T, data []byte) int {
	t.Helper()
	n := 0
	for off := len(wal.Magic); off+wal.FrameHeaderSize <= len(data); n++ {
		off += wal.FrameHeaderSize + int(binary.LittleEndian.Uint32(data[off:]))
	}
	return n
}

// A batch of large records is written as several frames of at most
// about maxFrameBytes, each flushed before the next is encoded, and
// every write of it is acknowledged and survives a crash.
func TestABatchOfLargeRecordsIsWrittenInBoundedFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	big := storage.Record{Status: "running", Meta: map[string]string{}}
	for k := range storage.MaxMetaEntries {
		big.Meta[fmt.Sprint("k", k)] = strings.Repeat("v", storage.MaxMetaValueLen)
	}
	const writers = 48 // about 12 MB in all
	release := db.HoldWriter()
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			rec := big.Clone()
			rec.ID = fmt.Sprint("big-", w)
			_, err := s.Create(context.Background(), rec)
			errs <- err
		}()
	}
	waitQueued(t, db, writers)
	release() // one leader takes them all
	for range writers {
		require.NoError(t, storagetest.Recv(t, errs, "a large write's outcome"))
	}
	segs, err := wal.ListSegments(wal.OS{}, path)
	require.NoError(t, err)
	data, err := os.ReadFile(segs[len(segs)-1].Path)
	require.NoError(t, err)
	require.Equal(t, 2, frames(t, data), "12 MB in frames of at most 8 MB and one record")
	db.Crash()

	db, err = Open(path, Options{})
	require.NoError(t, err)
	defer db.Close()
	s, err = db.Store("executions")
	require.NoError(t, err)
	recs, bad, err := s.List(context.Background())
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, writers)
}

// One batch, one frame: each write is checked against the store as the
// writes before it in the batch left it, and a write its checks refuse
// (a stale revision, a record that exists, a changed claim, a record
// that does not decode) fails alone while the rest are acknowledged
// together.
func TestAWriteRefusedInABatchFailsAloneAndTheRestCommitTogether(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	ctx := context.Background()
	shared, err := s.Create(ctx, storagetest.Sample("shared"))
	require.NoError(t, err)
	exists, err := s.Create(ctx, storagetest.Sample("exists"))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	raw, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("ns/executions")).Bucket(recordsKey).Put([]byte("garbled"), []byte{9, '{'})
	}))
	require.NoError(t, raw.Close())

	db, err = Open(path, Options{})
	require.NoError(t, err)
	defer db.Close()
	s, err = db.Store("executions")
	require.NoError(t, err)
	segs, err := wal.ListSegments(wal.OS{}, path)
	require.NoError(t, err)

	bumped := shared.Clone()
	bumped.Reason = "first"
	second := shared.Clone()
	second.Reason = "second, with the revision the first replaced"
	stolen := exists.Clone()
	stolen.Owner = "pod-b"
	writes := []struct {
		name  string
		write func() error
		want  error // nil: acknowledged
	}{
		{"a new record", func() error { _, err := s.Create(ctx, storagetest.Sample("new-1")); return err }, nil},
		{"a CAS at the stored revision", func() error { _, err := s.CompareAndSwap(ctx, "shared", shared.Revision, bumped); return err }, nil},
		{"a CAS at the revision the first replaced", func() error { _, err := s.CompareAndSwap(ctx, "shared", shared.Revision, second); return err }, storage.ErrConflict},
		{"a record that exists", func() error { _, err := s.Create(ctx, storagetest.Sample("exists")); return err }, storage.ErrExists},
		{"a claim changed", func() error { _, err := s.CompareAndSwap(ctx, "exists", exists.Revision, stolen); return err }, storage.ErrInvalidRecord},
		{"over a record that does not decode", func() error {
			_, err := s.CompareAndSwap(ctx, "garbled", 1, storage.Record{ID: "garbled", Status: "failed"})
			return err
		}, storage.ErrCorrupt},
		{"another new record", func() error { _, err := s.Create(ctx, storagetest.Sample("new-2")); return err }, nil},
	}
	release := db.HoldWriter()
	errs := make([]chan error, len(writes))
	for i, w := range writes {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- w.write() }()
		waitQueued(t, db, i+1) // queued in this order: the batch checks them in it
	}
	release() // one leader takes them all, in one batch
	for i, w := range writes {
		err := storagetest.Recv(t, errs[i], w.name)
		if w.want == nil {
			require.NoError(t, err, w.name)
		} else {
			require.ErrorIs(t, err, w.want, w.name)
		}
	}
	data, err := os.ReadFile(segs[len(segs)-1].Path) // the segment this Open started
	require.NoError(t, err)
	require.Equal(t, 1, frames(t, data), "the three acknowledged writes share one frame and one flush")

	got, err := s.Get(ctx, "shared")
	require.NoError(t, err)
	require.Equal(t, "first", got.Reason)
	for _, id := range []string{"new-1", "new-2"} {
		_, err := s.Get(ctx, id)
		require.NoError(t, err, id)
	}
	_, err = s.Get(ctx, "garbled")
	require.ErrorIs(t, err, storage.ErrCorrupt, "never overwritten")
}

// waitQueued waits, bounded, until n writes are queued behind the
// writer's turn.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		db.pendingMu.Lock()
		defer db.pendingMu.Unlock()
		return len(db.pending) == n
	}, 20*time.Second, time.Millisecond, "%d writes queue behind the held turn", n)
}

package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"bytes"
	"errors"
	"github.com/execfsm/execfsm/internal/testwait"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// segmentOf builds a segment holding one frame per batch.
func segmentOf(batches ...[]walEntry) []byte {
	out := []byte(walMagic)
	for _, batch := range batches {
		frame := make([]byte, frameHeaderSize)
		for _, e := range batch {
			frame = appendEntry(frame, e.revision, e.namespace, e.id, e.data)
		}
		sealFrame(frame)
		out = append(out, frame...)
	}
	return out
}

func entryOf(t testing.TB, revision uint64, id string) walEntry {
	data, err := storage.Record{ID: id, Status: "running", Revision: revision}.MarshalBinary()
	require.NoError(t, err)
	return walEntry{revision: revision, namespace: "executions", id: id, data: data}
}

// A frame whose checksum holds was written whole, by someone: entries
// that do not decode, or records that are not what the entry says, are
// damage (or a foreign writer), refused with ErrCorrupt, never read as
// a torn tail.
func TestFramesThatPassTheirChecksumButDoNotDecodeAreCorrupt(t *testing.T) {
	good := entryOf(t, 1, "ex-1")
	otherRecord := entryOf(t, 2, "ex-2")
	for name, tc := range map[string]struct {
		segment []byte
		want    string
	}{
		"an empty frame before another":   {segmentOf([]walEntry{}, []walEntry{good}), "empty"},
		"a record naming another id":      {segmentOf([]walEntry{{revision: 2, namespace: "executions", id: "ex-1", data: otherRecord.data}}), "says it is"},
		"a record at another revision":    {segmentOf([]walEntry{{revision: 7, namespace: "executions", id: "ex-2", data: otherRecord.data}}), "at revision 2"},
		"a record that does not decode":   {segmentOf([]walEntry{{revision: 1, namespace: "executions", id: "ex-1", data: []byte{9, '{'}}}), "record \"ex-1\""},
		"a namespace that is not UTF-8":   {segmentOf([]walEntry{{revision: 1, namespace: "exec\xff", id: "ex-1", data: good.data}}), "UTF-8"},
		"an empty id":                     {segmentOf([]walEntry{{revision: 1, namespace: "executions", id: "", data: good.data}}), "revision 1"},
		"revision zero":                   {segmentOf([]walEntry{{revision: 0, namespace: "executions", id: "ex-1", data: good.data}}), "without a revision"},
		"a bad frame before a good frame": {append(bytes.Replace(segmentOf([]walEntry{good}), []byte("running"), []byte("runnin!"), 1), segmentOf([]walEntry{otherRecord})[len(walMagic):]...), "checksum"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readSegment(tc.segment)
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.ErrorContains(t, err, tc.want)
		})
	}
	contents, err := readSegment(segmentOf([]walEntry{good, otherRecord}))
	require.NoError(t, err)
	require.False(t, contents.torn)
	good.frame, otherRecord.frame = len(walMagic), len(walMagic) // one frame, right after the magic
	require.Equal(t, []walEntry{good, otherRecord}, contents.entries)
}

// FuzzReadSegment feeds arbitrary bytes to the log's decoder, as Open
// would find them beside a database. It must return entries, a torn
// tail or an error matching ErrCorrupt, never panic; what it returns
// must encode back to a prefix of the input.
func FuzzReadSegment(f *testing.F) {
	good := segmentOf([]walEntry{entryOf(f, 1, "ex-1"), entryOf(f, 2, "ex-2")}, []walEntry{entryOf(f, 3, "ex-1")})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte(walMagic))
	f.Add([]byte(walMagic[:5]))
	f.Add(append([]byte(walMagic), make([]byte, 40)...))
	f.Add([]byte("not a log at all, but long enough to look like one"))
	zeroedHeader := append([]byte(nil), good...)
	clear(zeroedHeader[len(walMagic) : len(walMagic)+frameHeaderSize]) // whole frames follow: damage
	f.Add(zeroedHeader)
	tornHead := append([]byte(nil), good...)
	first := len(walMagic) + frameHeaderSize + int(binary.LittleEndian.Uint32(good[len(walMagic):]))
	clear(tornHead[first : first+frameHeaderSize]) // the last frame's header: a torn tail
	f.Add(tornHead)
	f.Fuzz(func(t *testing.T, data []byte) {
		contents, err := readSegment(data)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if len(contents.entries) == 0 {
			return
		}
		// Re-encode, one entry a frame: the entries themselves must be
		// what the input held, so each must encode to bytes of it.
		for _, e := range contents.entries {
			enc := appendEntry(nil, e.revision, e.namespace, e.id, e.data)
			if !bytes.Contains(data, enc) {
				t.Fatalf("entry at revision %d is not in the input", e.revision)
			}
		}
	})
}

// frames counts the frames of a segment.
func frames(t *testing.T, data []byte) int {
	t.Helper()
	n := 0
	for off := len(walMagic); off+frameHeaderSize <= len(data); n++ {
		off += frameHeaderSize + int(binary.LittleEndian.Uint32(data[off:]))
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
		require.NoError(t, testwait.Recv(t, errs, "a large write's outcome"))
	}
	segs, err := listSegments(osFS{}, path)
	require.NoError(t, err)
	data, err := os.ReadFile(segs[len(segs)-1].path)
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
	segs, err := listSegments(osFS{}, path)
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
		err := testwait.Recv(t, errs[i], w.name)
		if w.want == nil {
			require.NoError(t, err, w.name)
		} else {
			require.ErrorIs(t, err, w.want, w.name)
		}
	}
	data, err := os.ReadFile(segs[len(segs)-1].path) // the segment this Open started
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

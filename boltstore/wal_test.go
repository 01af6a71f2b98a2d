package boltstore_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// segments returns the log segments beside path, oldest first.
func segments(t *testing.T, path string) []string {
	t.Helper()
	found, err := filepath.Glob(path + ".wal-*")
	require.NoError(t, err)
	return found
}

// files reads the database and its log segments.
func files(t *testing.T, path string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range append(segments(t, path), path) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = data
	}
	return out
}

// digests names each file of files with a digest of its bytes, to be
// compared without printing megabytes.
func digests(files map[string][]byte) map[string]string {
	out := map[string]string{}
	for p, data := range files {
		out[p] = fmt.Sprintf("%d bytes, sha256 %x", len(data), sha256.Sum256(data))
	}
	return out
}

// crashedWith writes records ex-0 … ex-(n-1), one batch each, and leaves
// the files as a SIGKILL would, the log not applied. It returns the size
// of the last segment after each write.
func crashedWith(t *testing.T, path string, n int) []int64 {
	t.Helper()
	return crashedWithRecords(t, path, n, func(k int) storage.Record { return storagetest.Sample(fmt.Sprint("ex-", k)) })
}

// crashedWithRecords is crashedWith, writing record(k) as ex-k.
func crashedWithRecords(t *testing.T, path string, n int, record func(k int) storage.Record) []int64 {
	t.Helper()
	db, s := openStore(t, path, boltstore.Options{})
	var sizes []int64
	for k := range n {
		_, err := s.Create(bg, record(k))
		require.NoError(t, err)
		segs := segments(t, path)
		info, err := os.Stat(segs[len(segs)-1])
		require.NoError(t, err)
		sizes = append(sizes, info.Size())
	}
	db.Crash()
	return sizes
}

// requireRecords fails unless the store holds exactly ex-0 … ex-(n-1),
// by Get, List and Watch.
func requireRecords(t *testing.T, s *boltstore.Store, n int) {
	t.Helper()
	for k := range n {
		_, err := s.Get(bg, fmt.Sprint("ex-", k))
		require.NoError(t, err, "ex-%d", k)
	}
	_, err := s.Get(bg, fmt.Sprint("ex-", n))
	require.ErrorIs(t, err, storage.ErrNotFound, "ex-%d was never acknowledged", n)
	recs, bad, err := s.List(bg)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, n)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch, err := s.Watch(ctx, 0)
	require.NoError(t, err)
	seen := map[string]bool{}
	for range n {
		seen[nextEvent(t, ch).ID] = true
	}
	require.Len(t, seen, n)
}

// A write acknowledged is in the log, not yet in bbolt; after a crash a
// read-only Open reads the log without changing a byte of either file,
// and a writable Open applies it to bbolt and starts a new, empty
// segment. After Close only the bbolt file is left, holding everything.
func TestTheLogIsReadAtOpenAndAppliedToTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	crashedWith(t, path, 5)
	require.Len(t, segments(t, path), 1)
	before := files(t, path)

	ro, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	s, err := ro.Store("executions")
	require.NoError(t, err)
	requireRecords(t, s, 5)
	require.NoError(t, ro.Check())
	require.NoError(t, ro.Close())
	require.Equal(t, digests(before), digests(files(t, path)), "a read-only Open changes nothing")

	db, s := openStore(t, path, boltstore.Options{})
	requireRecords(t, s, 5)
	segs := segments(t, path)
	require.Len(t, segs, 1)
	require.NotContains(t, before, segs[0], "a new segment, the old one applied and removed")
	rec, err := s.Create(bg, storagetest.Sample("ex-5"))
	require.NoError(t, err)
	require.Equal(t, uint64(6), rec.Revision, "revisions go on from the log's")
	require.NoError(t, db.Close())
	require.Empty(t, segments(t, path), "Close applies the log and removes it")

	raw, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.View(func(tx *bolt.Tx) error {
		require.Equal(t, 6, tx.Bucket([]byte("ns/executions")).Bucket([]byte("records")).Stats().KeyN)
		return nil
	}))
}

// A crash while a batch is being written leaves its frame cut short at
// the end of the log: the batch was never acknowledged, and Open drops
// it and keeps everything before it, whatever is left of the frame.
func TestATornTailIsDroppedAndEverythingBeforeItKept(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	sizes := crashedWith(t, good, 5)
	frameStart, frameEnd := sizes[3], sizes[4] // the frame of ex-4
	pristine := files(t, good)
	seg := segments(t, good)[0]

	for name, tail := range map[string]func([]byte) []byte{
		"cut in the header":     func(b []byte) []byte { return b[:frameStart+3] },
		"cut in the payload":    func(b []byte) []byte { return b[:frameEnd-1] },
		"header only":           func(b []byte) []byte { return b[:frameStart+8] },
		"zeros where it was":    func(b []byte) []byte { return append(b[:frameStart:frameStart], make([]byte, 4096)...) },
		"last byte of it wrong": func(b []byte) []byte { b = append([]byte(nil), b...); b[frameEnd-1] ^= 0xff; return b },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			require.NoError(t, os.WriteFile(path, pristine[good], 0o600))
			require.NoError(t, os.WriteFile(path+filepath.Base(seg)[len("good"):], tail(pristine[seg]), 0o600))
			_, s := openStore(t, path, boltstore.Options{})
			requireRecords(t, s, 4)
			_, err := s.Create(bg, storagetest.Sample("ex-4"))
			require.NoError(t, err, "the store takes writes after dropping the torn tail")
		})
	}
}

// Damage to a frame that has frames after it, or to a log's order, is
// damage to acknowledged writes: every Open refuses it with ErrCorrupt
// naming the segment, and leaves every file as it was.
func TestDamageToAcknowledgedWritesInTheLogIsRefused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	sizes := crashedWith(t, good, 5)
	pristine := files(t, good)
	seg := segments(t, good)[0]
	suffix := filepath.Base(seg)[len("good"):]
	next := suffix[:len(suffix)-1] + "9" // a later segment

	for name, damage := range map[string]func(path string){
		"a byte flipped in the second frame": func(path string) {
			b := append([]byte(nil), pristine[seg]...)
			b[sizes[0]+10] ^= 0x40
			require.NoError(t, os.WriteFile(path+suffix, b, 0o600))
		},
		"not a log": func(path string) {
			require.NoError(t, os.WriteFile(path+suffix, []byte("these are not the bytes of a write-ahead log"), 0o600))
		},
		"a torn segment followed by another": func(path string) {
			require.NoError(t, os.WriteFile(path+suffix, pristine[seg][:sizes[4]-2], 0o600))
			require.NoError(t, os.WriteFile(path+next, pristine[seg][:sizes[0]], 0o600))
		},
		"revisions going back": func(path string) {
			require.NoError(t, os.WriteFile(path+suffix, pristine[seg], 0o600))
			require.NoError(t, os.WriteFile(path+next, pristine[seg], 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			require.NoError(t, os.WriteFile(path, pristine[good], 0o600))
			damage(path)
			before := files(t, path)
			for _, readOnly := range []bool{true, false} {
				db, err := boltstore.Open(path, boltstore.Options{ReadOnly: readOnly})
				if err == nil {
					_ = db.Close()
				}
				require.ErrorIs(t, err, storage.ErrCorrupt, "read-only %v", readOnly)
				require.ErrorContains(t, err, path+".wal-")
			}
			require.Equal(t, digests(before), digests(files(t, path)), "the damaged log is left for whoever repairs it")
		})
	}
}

// Check reads the log on disk again: damage done to it while the store
// runs is reported, as damage to the bbolt file is.
func TestCheckReportsDamageToTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	var sizes []int64
	for k := range 3 {
		_, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k)))
		require.NoError(t, err)
		info, err := os.Stat(segments(t, path)[0])
		require.NoError(t, err)
		sizes = append(sizes, info.Size())
	}
	require.NoError(t, db.Check())
	f, err := os.OpenFile(segments(t, path)[0], os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xde, 0xad}, sizes[0]+12)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = db.Check()
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "checksum")
}

// Reads that combine the log with bbolt see one revision, across
// checkpoints: a writer bumps a, then b, forever, and no List sees b
// ahead of a or a more than one ahead of b; a watch sees every write
// once, in order, across checkpoints and after them.
func TestReadsSeeOneRevisionAcrossCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	db.CheckpointEvery(5)
	for _, id := range []string{"a", "b"} {
		_, err := s.Create(bg, storage.Record{ID: id, Status: "running", Meta: map[string]string{"n": "0"}})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	events, err := s.Watch(ctx, 2)
	require.NoError(t, err)

	const bumps = 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n <= bumps && ctx.Err() == nil; n++ {
			for _, id := range []string{"a", "b"} {
				cur, err := s.Get(ctx, id)
				if err != nil {
					t.Error(err)
					return
				}
				next := cur.Clone()
				next.Meta["n"] = strconv.Itoa(n)
				if _, err := s.CompareAndSwap(ctx, id, cur.Revision, next); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	lists := 0
	for done := false; !done; {
		select {
		case <-ctx.Done():
			t.Fatal("the writer did not finish in 20s")
		default:
		}
		recs, bad, err := s.List(bg)
		require.NoError(t, err)
		require.Empty(t, bad)
		require.Len(t, recs, 2)
		a, _ := strconv.Atoi(recs[0].Meta["n"])
		b, _ := strconv.Atoi(recs[1].Meta["n"])
		require.Contains(t, []int{b, b + 1}, a, "List saw a at %d and b at %d", a, b)
		lists++
		done = b == bumps
	}
	wg.Wait()
	var last uint64 = 2
	for range 2 * bumps {
		ev := nextEvent(t, events)
		require.Equal(t, last+1, ev.Revision, "every write once, in order")
		last = ev.Revision
	}
	t.Logf("%d lists, %d log segments in memory at the end", lists, db.LogSegments())
}

// A log the disk refuses to take (here its file closed under the
// leader) fails the batch and every write after it; the writes
// acknowledged before it are still read, and Close applies them to the
// file, so the next Open has them.
func TestWritesStopWhenTheLogCannotBeWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 3 {
		_, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k)))
		require.NoError(t, err)
	}
	db.BreakLog()
	_, err := s.Create(bg, storagetest.Sample("ex-3"))
	require.ErrorContains(t, err, "writing the log")
	_, err = s.Create(bg, storagetest.Sample("ex-4"))
	require.ErrorContains(t, err, "writes stopped")
	requireRecords(t, s, 3)
	require.NoError(t, db.Close())
	require.Empty(t, segments(t, path))

	_, s = openStore(t, path, boltstore.Options{})
	requireRecords(t, s, 3)
}

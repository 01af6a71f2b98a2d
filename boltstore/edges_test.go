package boltstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// Two Closes at once: neither returns before the log is applied and
// removed and the file released, as Close promises.
func TestASecondCloseWaitsForTheFirst(t *testing.T) {
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "db")
		db, err := boltstore.Open(path, boltstore.Options{})
		require.NoError(t, err)
		s, err := db.Store("executions")
		require.NoError(t, err)
		for k := range 300 { // a log for Close to apply
			_, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k)))
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		left := make([][]string, 2)
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = db.Close()
				left[k] = segments(t, path)
			}()
		}
		wg.Wait()
		for k := range 2 {
			require.NoError(t, errs[k], "round %d, Close %d", round, k)
			require.Empty(t, left[k], "round %d: Close %d returned with the log still beside the file", round, k)
		}
		raw, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
		require.NoError(t, err, "the file is released")
		require.NoError(t, raw.Close())
	}
}

// A nil *Store in a storage.Store (a store never opened) is an error
// where it is handed over, and on every call: never a panic.
func TestANilStoreIsAnErrorNotAPanic(t *testing.T) {
	var s *boltstore.Store
	_, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.ErrorContains(t, err, "nil store")
	_, err = s.Get(bg, "ex-1")
	require.ErrorContains(t, err, "nil *Store")
	_, err = s.CompareAndSwap(bg, "ex-1", 1, storagetest.Sample("ex-1"))
	require.Error(t, err)
	_, _, err = s.Acquire(bg, "ex-1", storagetest.Lease("pod-a"))
	require.Error(t, err)
	_, _, err = s.Held(bg, "ex-1")
	require.Error(t, err)
	_, _, err = s.List(bg)
	require.Error(t, err)
	_, err = s.Watch(bg, 0)
	require.Error(t, err)
}

// splitLog rewrites the one segment crashedWith left beside path as
// several, cut at the frame boundaries given (segment k holds the frames
// from bounds[k] up to bounds[k+1]), numbered on from the original.
func splitLog(t *testing.T, path string, sizes []int64, bounds ...int) []string {
	t.Helper()
	segs := segments(t, path)
	require.Len(t, segs, 1)
	data, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	require.NoError(t, os.Remove(segs[0]))
	magic := data[:frameStart(t, data)]
	start := func(frame int) int64 {
		if frame == 0 {
			return int64(len(magic))
		}
		return sizes[frame-1]
	}
	var seq uint64
	_, err = fmt.Sscanf(filepath.Base(segs[0])[len(filepath.Base(path))+len(".wal-"):], "%x", &seq)
	require.NoError(t, err)
	var out []string
	for k := 0; k+1 < len(bounds); k++ {
		name := fmt.Sprintf("%s.wal-%016x", path, seq+uint64(k))
		body := append(append([]byte(nil), magic...), data[start(bounds[k]):start(bounds[k+1])]...)
		require.NoError(t, os.WriteFile(name, body, 0o600))
		out = append(out, name)
	}
	return out
}

// frameStart returns where the first frame of a segment's bytes starts:
// right after its magic, which the bytes begin with.
func frameStart(t *testing.T, data []byte) int64 {
	t.Helper()
	const magic = "execfsm-wal\x00\x00\x01"
	require.Equal(t, magic, string(data[:len(magic)]))
	return int64(len(magic))
}

// Segment numbers and revisions both run on without a gap: a segment
// missing in the middle or at the start, or one cut short at a frame's
// end with a later one after it, is acknowledged writes gone, and every
// Open refuses it, naming the revisions missing. A cut at a frame's end
// in the last segment cannot be told from writes never made (no check
// of a frame can tell): Open keeps what is there.
func TestAGapInTheLogIsRefused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	sizes := crashedWith(t, good, 6)
	pristine := files(t, good)

	setUp := func(t *testing.T) (string, []string) {
		path := filepath.Join(t.TempDir(), "db")
		require.NoError(t, os.WriteFile(path, pristine[good], 0o600))
		seg := segments(t, good)[0]
		require.NoError(t, os.WriteFile(path+filepath.Base(seg)[len("good"):], pristine[seg], 0o600))
		return path, splitLog(t, path, sizes, 0, 2, 4, 6) // frames 0-1, 2-3, 4-5
	}
	t.Run("whole", func(t *testing.T) {
		path, _ := setUp(t)
		_, s := openStore(t, path, boltstore.Options{})
		requireRecords(t, s, 6)
	})
	for name, c := range map[string]struct {
		damage  func(segs []string)
		missing string
	}{
		"the middle segment removed": {func(segs []string) { require.NoError(t, os.Remove(segs[1])) }, "misses revisions 3 to 4"},
		"the first segment removed":  {func(segs []string) { require.NoError(t, os.Remove(segs[0])) }, "no such log is beside"},
		"the middle segment cut at a frame's end": {func(segs []string) {
			info, err := os.Stat(segs[1])
			require.NoError(t, err)
			require.NoError(t, os.Truncate(segs[1], info.Size()-(sizes[3]-sizes[2])))
		}, "misses revisions 4 to 4"},
	} {
		t.Run(name, func(t *testing.T) {
			path, segs := setUp(t)
			c.damage(segs)
			before := files(t, path)
			for _, readOnly := range []bool{true, false} {
				db, err := boltstore.Open(path, boltstore.Options{ReadOnly: readOnly})
				if err == nil {
					_ = db.Close()
				}
				require.ErrorIs(t, err, storage.ErrCorrupt, "read-only %v", readOnly)
				require.ErrorContains(t, err, c.missing)
			}
			require.Equal(t, digests(before), digests(files(t, path)), "the log is left for whoever repairs it")
		})
	}
	t.Run("the last segment cut at a frame's end", func(t *testing.T) {
		path, segs := setUp(t)
		info, err := os.Stat(segs[2])
		require.NoError(t, err)
		require.NoError(t, os.Truncate(segs[2], info.Size()-(sizes[5]-sizes[4])))
		_, s := openStore(t, path, boltstore.Options{})
		requireRecords(t, s, 5)
	})
}

// crashedWithLarge is crashedWith with records of several kilobytes, so
// that each frame spans several sectors and pages.
func crashedWithLarge(t *testing.T, path string, n int) []int64 {
	t.Helper()
	return crashedWithRecords(t, path, n, func(k int) storage.Record {
		rec := storagetest.Sample(fmt.Sprint("ex-", k))
		for m := range 3 {
			rec.Meta[fmt.Sprint("blob-", m)] = string(bytesOf(byte('a'+k), 4000))
		}
		return rec
	})
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for k := range out {
		out[k] = b
	}
	return out
}

// What a power cut may leave of the last frame, never acknowledged: its
// first sector or page as zeros with the later ones written, its pages
// out of order, the file grown with zeros. Each is a torn tail: Open
// drops it and keeps everything before. The same zeros in a frame with
// whole frames after it are damage to acknowledged writes, refused.
func TestWhatAPowerCutLeavesOfTheLastFrameIsATornTail(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	sizes := crashedWithLarge(t, good, 4)
	pristine := files(t, good)
	seg := segments(t, good)[0]
	last, end := sizes[2], sizes[3] // the frame of ex-3
	require.Greater(t, end-last, int64(3*4096), "a frame of several pages")
	zero := func(b []byte, from, to int64) []byte {
		b = append([]byte(nil), b...)
		clear(b[from:to])
		return b
	}
	// Zeros can be where the file grew past its old end: from the
	// frame's start, never before it (the sector it starts in held the
	// previous frame's end, flushed).
	next := func(off, size int64) int64 { return (off/size + 1) * size }
	for name, c := range map[string]struct {
		cut  func([]byte) []byte
		kept int
	}{
		"its first sector zeros": {func(b []byte) []byte { return zero(b, last, next(last, 512)) }, 3},
		"its first page zeros":   {func(b []byte) []byte { return zero(b, last, next(last, 4096)) }, 3},
		"a middle sector zeros":  {func(b []byte) []byte { return zero(b, next(last, 512)+2048, next(last, 512)+2560) }, 3},
		"its header zeros only":  {func(b []byte) []byte { return zero(b, last, last+8) }, 3},
		"two pages out of order": {func(b []byte) []byte {
			b = append([]byte(nil), b...)
			p := (last/4096 + 1) * 4096
			tmp := append([]byte(nil), b[p:p+4096]...)
			copy(b[p:p+4096], b[p+4096:p+8192])
			copy(b[p+4096:p+8192], tmp)
			return b
		}, 3},
		"the file grown with zeros": {func(b []byte) []byte { return append(append([]byte(nil), b...), make([]byte, 8192)...) }, 4},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			require.NoError(t, os.WriteFile(path, pristine[good], 0o600))
			require.NoError(t, os.WriteFile(path+filepath.Base(seg)[len("good"):], c.cut(pristine[seg]), 0o600))
			_, s := openStore(t, path, boltstore.Options{})
			requireRecords(t, s, c.kept)
		})
	}
	t.Run("the same zeros with whole frames after them", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "db")
		require.NoError(t, os.WriteFile(path, pristine[good], 0o600))
		damaged := zero(pristine[seg], sizes[0], sizes[0]+8) // the header of ex-1's frame
		require.NoError(t, os.WriteFile(path+filepath.Base(seg)[len("good"):], damaged, 0o600))
		_, err := boltstore.Open(path, boltstore.Options{})
		require.ErrorIs(t, err, storage.ErrCorrupt)
		require.ErrorContains(t, err, "a whole frame follows it")
	})
}

// The segment the store writes to, removed while it is open: the next
// write is not acknowledged and writes stop, Check says why, and Close
// still applies every write acknowledged before, so none is lost.
func TestTheLiveSegmentRemovedStopsWritesAndIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 3 {
		_, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k)))
		require.NoError(t, err)
	}
	require.NoError(t, db.Check())
	segs := segments(t, path)
	require.Len(t, segs, 1)
	require.NoError(t, os.Remove(segs[0]))

	err := db.Check()
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "removed or replaced while in use")
	_, err = s.Create(bg, storagetest.Sample("ex-3"))
	require.ErrorContains(t, err, "removed or replaced while in use", "a write into the removed segment is not acknowledged")
	_, err = s.Create(bg, storagetest.Sample("ex-4"))
	require.Error(t, err, "and writes stop")
	require.NoError(t, db.Close())

	_, s = openStore(t, path, boltstore.Options{})
	requireRecords(t, s, 3)
}

// Check decodes the records of every namespace the file holds, not only
// of those this process opened.
func TestCheckReadsEveryNamespaceOfTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	other, err := db.Store("other")
	require.NoError(t, err)
	_, err = other.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	raw, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("ns/other")).Bucket([]byte("records")).Put([]byte("ex-1"), []byte("not a record"))
	}))
	require.NoError(t, raw.Close())

	for _, readOnly := range []bool{false, true} {
		db, err := boltstore.Open(path, boltstore.Options{ReadOnly: readOnly})
		require.NoError(t, err)
		err = db.Check() // no Store opened
		require.NoError(t, db.Close())
		require.ErrorIs(t, err, storage.ErrCorrupt, "read-only %v", readOnly)
		require.ErrorContains(t, err, `namespace "other", record "ex-1"`)
	}
}

// A database and its log cannot be separated by a name. After a crash,
// with writes in the log only: opened through a symbolic link it finds
// its log; opened under another name (a hard link) or copied without its
// log it is refused, naming the log it misses, and nothing is written,
// so the real one still opens with everything. Once closed, the file
// alone holds everything and a copy of it opens.
func TestADatabaseAndItsLogCannotBeSeparatedByAName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	crashedWith(t, path, 5)
	before := digests(files(t, path))

	link := filepath.Join(t.TempDir(), "link-to-db")
	require.NoError(t, os.Symlink(path, link))
	hard := filepath.Join(dir, "other-name")
	require.NoError(t, os.Link(path, hard))
	copied := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.WriteFile(copied, files(t, path)[path], 0o600))

	for _, other := range []string{hard, copied} {
		for _, readOnly := range []bool{true, false} {
			db, err := boltstore.Open(other, boltstore.Options{ReadOnly: readOnly})
			if err == nil {
				_ = db.Close()
			}
			require.ErrorIs(t, err, storage.ErrCorrupt, "%s, read-only %v", other, readOnly)
			require.ErrorContains(t, err, path+".wal-0000000000000001 on", "it says where the log is")
			require.ErrorContains(t, err, "no such log is beside "+other)
		}
	}
	require.Equal(t, before, digests(files(t, path)), "nothing written by the refused opens")

	db, s := openStore(t, link, boltstore.Options{})
	requireRecords(t, s, 5)
	rec, err := s.Create(bg, storagetest.Sample("ex-5"))
	require.NoError(t, err)
	require.Equal(t, uint64(6), rec.Revision, "revisions go on from the log's")
	require.NoError(t, db.Close())
	require.Empty(t, segments(t, link), "no log beside the link's name")
	require.Empty(t, segments(t, path), "Close applied the log and removed it")

	require.NoError(t, os.WriteFile(copied, files(t, path)[path], 0o600))
	_, s = openStore(t, copied, boltstore.Options{})
	requireRecords(t, s, 6)
}

// A damaged log is repaired only on request, knowing what is dropped:
// InspectLog names every acknowledged write a repair would drop and
// changes nothing; RepairLog refuses a fingerprint that is not the log's
// and, with it, cuts the log at its last good frame. The database then
// opens with the writes before the damage, and no revision handed out
// before comes round again.
func TestADamagedLogIsRepairedOnlyOnRequestKnowingWhatIsDropped(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	sizes := crashedWith(t, good, 5)
	pristine := files(t, good)
	seg := segments(t, good)[0]
	suffix := filepath.Base(seg)[len("good"):]
	for name, c := range map[string]struct {
		damage  func(path string)
		dropped []uint64
		kept    int
		missing [2]uint64
	}{
		"a byte flipped in the second frame": {func(path string) {
			b := append([]byte(nil), pristine[seg]...)
			b[sizes[0]+10] ^= 0x40
			require.NoError(t, os.WriteFile(path+suffix, b, 0o600))
		}, []uint64{3, 4, 5}, 1, [2]uint64{}},
		"a gap: the middle of three segments removed": {func(path string) {
			require.NoError(t, os.WriteFile(path+suffix, pristine[seg], 0o600))
			segs := splitLog(t, path, sizes, 0, 2, 4, 5)
			require.NoError(t, os.Remove(segs[1]))
		}, []uint64{5}, 2, [2]uint64{3, 4}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			require.NoError(t, os.WriteFile(path, pristine[good], 0o600))
			c.damage(path)
			before := digests(files(t, path))
			_, err := boltstore.Open(path, boltstore.Options{})
			require.ErrorIs(t, err, storage.ErrCorrupt)

			d, err := boltstore.InspectLog(path, boltstore.Options{})
			require.NoError(t, err)
			require.NotNil(t, d)
			require.NotEmpty(t, d.Problem)
			var dropped []uint64
			for _, w := range d.Dropped {
				require.Equal(t, "executions", w.Namespace)
				require.Equal(t, fmt.Sprint("ex-", w.Revision-1), w.ID)
				dropped = append(dropped, w.Revision)
			}
			require.Equal(t, c.dropped, dropped, "the acknowledged writes a repair drops")
			require.Equal(t, c.missing, [2]uint64{d.MissingFrom, d.MissingTo})
			require.NotEmpty(t, d.Fingerprint)
			require.Equal(t, before, digests(files(t, path)), "inspecting changes nothing")

			_, err = boltstore.RepairLog(path, "0123456789abcdef", boltstore.Options{})
			require.ErrorIs(t, err, boltstore.ErrLogChanged)
			require.Equal(t, before, digests(files(t, path)), "a wrong fingerprint repairs nothing")

			repaired, err := boltstore.RepairLog(path, d.Fingerprint, boltstore.Options{})
			require.NoError(t, err)
			require.Equal(t, d.Dropped, repaired.Dropped)
			again, err := boltstore.InspectLog(path, boltstore.Options{})
			require.NoError(t, err)
			require.Nil(t, again, "nothing is wrong any more")

			_, s := openStore(t, path, boltstore.Options{})
			requireRecords(t, s, c.kept)
			rec, err := s.Create(bg, storagetest.Sample("after"))
			require.NoError(t, err)
			require.Greater(t, rec.Revision, uint64(5), "a revision the dropped writes had is not handed out again")
		})
	}
}

// A database copied without its log: the repair accepts that the log's
// writes are gone (it cannot name them) and revisions jump past any it
// could have held.
func TestALogThatIsMissingIsGivenUpOnlyOnRequest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	crashedWith(t, path, 3)
	copied := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.WriteFile(copied, files(t, path)[path], 0o600))

	d, err := boltstore.InspectLog(copied, boltstore.Options{})
	require.NoError(t, err)
	require.Equal(t, path+".wal-0000000000000001", d.LogMissing)
	require.Empty(t, d.Dropped, "its writes cannot be named")
	_, err = boltstore.RepairLog(copied, d.Fingerprint, boltstore.Options{})
	require.NoError(t, err)
	_, s := openStore(t, copied, boltstore.Options{})
	requireRecords(t, s, 0)
	rec, err := s.Create(bg, storagetest.Sample("after"))
	require.NoError(t, err)
	require.Greater(t, rec.Revision, uint64(1)<<32, "past any revision the missing log could hold")
}

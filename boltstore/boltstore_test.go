package boltstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

// The test binary doubles as the child processes the tests kill: with
// BOLTSTORE_CHILD set it runs that mode instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("BOLTSTORE_CHILD") {
	case "writer":
		os.Exit(childWriter(os.Getenv("BOLTSTORE_PATH")))
	case "writers":
		os.Exit(childWriters(os.Getenv("BOLTSTORE_PATH")))
	case "hold":
		os.Exit(childHold(os.Getenv("BOLTSTORE_PATH")))
	case "read-damaged":
		os.Exit(childReadDamaged(os.Getenv("BOLTSTORE_PATH")))
	case "removed-log":
		os.Exit(childRemovedLog(os.Getenv("BOLTSTORE_PATH")))
	}
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

func openStore(t testing.TB, path string, opts boltstore.Options) (*boltstore.DB, *boltstore.Store) {
	t.Helper()
	db, err := boltstore.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := db.Store("executions")
	require.NoError(t, err)
	return db, s
}

// The ownership promises the recovery decisions rest on, on bbolt.
func TestStartupOwnership(t *testing.T) {
	recoverytest.RunOwnership(t, func(t *testing.T) storage.Store {
		_, s := openStore(t, filepath.Join(t.TempDir(), "executions.db"), boltstore.Options{})
		return s
	}, recoverytest.Options{})
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		_, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
		return s
	})
}

func TestPersistedLifecycleOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To(state.Pending).Because("submitted"))
	require.NoError(t, err)
	for _, to := range []state.Status{state.Scheduling, state.Initializing, state.Running, state.Relocating} {
		_, err := exec.Fire(bg, to, "step")
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	// Close released the lock: the same process reopens at once.
	_, s = openStore(t, path, boltstore.Options{Timeout: 50 * time.Millisecond})
	exec, err = transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	cur, rec, err := exec.Load(bg)
	require.NoError(t, err)
	require.Equal(t, state.Relocating, cur)
	require.Equal(t, "running", rec.Previous)
	require.Equal(t, 5, rec.History.Len())
}

func TestRevisionsIncreaseAcrossNamespacesAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	a, err := db.Store("a")
	require.NoError(t, err)
	b, err := db.Store("b")
	require.NoError(t, err)
	r1, err := a.Create(bg, storagetest.Sample("x"))
	require.NoError(t, err)
	r2, err := b.Create(bg, storagetest.Sample("x"))
	require.NoError(t, err)
	require.Greater(t, r2.Revision, r1.Revision)
	_, err = a.Get(bg, "x")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = a.Get(bg, "x")
	require.ErrorIs(t, err, boltstore.ErrClosed)

	db, err = boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	defer db.Close()
	a, err = db.Store("a")
	require.NoError(t, err)
	r3, err := a.Create(bg, storagetest.Sample("y"))
	require.NoError(t, err)
	require.Greater(t, r3.Revision, r2.Revision)
	_, err = db.Store("")
	require.Error(t, err)
}

func TestOpenRefusesBadOptions(t *testing.T) {
	_, err := boltstore.Open(filepath.Join(t.TempDir(), "db"), boltstore.Options{Timeout: -1})
	require.Error(t, err)
	_, err = boltstore.Open(filepath.Join(t.TempDir(), "db"), boltstore.Options{LogSize: -1})
	require.Error(t, err)
	_, err = boltstore.Open(filepath.Join(t.TempDir(), "missing", "dir", "db"), boltstore.Options{})
	require.Error(t, err)
}

// child starts the test binary in a child mode and returns it with its
// stdout.
func child(t *testing.T, mode, path string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "BOLTSTORE_CHILD="+mode, "BOLTSTORE_PATH="+path), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// watchdog kills cmd once it has run for limit, so a child that hangs
// ends the test's reading of it; hung reports whether it had to.
func watchdog(cmd *exec.Cmd, limit time.Duration) (hung func() bool) {
	var fired atomic.Bool
	timer := time.AfterFunc(limit, func() {
		fired.Store(true)
		_ = cmd.Process.Kill()
	})
	return func() bool { timer.Stop(); return fired.Load() }
}

func childHold(path string) int {
	db, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

func TestSecondProcessGetsAClearErrorAfterTheTimeoutNotAHang(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	_, out := child(t, "hold", path)
	require.True(t, out.Scan())
	require.Equal(t, "ready", out.Text())

	start := time.Now()
	_, err := boltstore.Open(path, boltstore.Options{Timeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, boltstore.ErrLocked)
	require.Contains(t, err.Error(), path)
	require.Less(t, time.Since(start), 5*time.Second)

	// A reader is excluded too: bbolt's shared lock waits for the
	// writer's exclusive one.
	_, err = boltstore.Open(path, boltstore.Options{Timeout: 200 * time.Millisecond, ReadOnly: true})
	require.ErrorIs(t, err, boltstore.ErrLocked)

	// The log is the holder's, being appended to and removed: it is read
	// only under the lock, so whatever it holds meanwhile (here a file
	// that is no log at all) a second process is told the file is held.
	require.NoError(t, os.WriteFile(path+".wal-ffffffffffffffff", []byte("not a log"), 0o600))
	for _, readOnly := range []bool{false, true} {
		_, err = boltstore.Open(path, boltstore.Options{Timeout: 200 * time.Millisecond, ReadOnly: readOnly})
		require.ErrorIs(t, err, boltstore.ErrLocked, "read-only %v", readOnly)
	}
}

// Read-only opens share the file with one another, read what it holds,
// refuse every write with ErrReadOnly, and keep a writer out while open.
func TestReadOnlyOpensShareTheFileReadAndRefuseWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To(state.Pending))
	require.NoError(t, err)
	written, err := exec.Fire(bg, state.Scheduling, "placed")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	first, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer first.Close()
	second, err := boltstore.Open(path, boltstore.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	require.NoError(t, err, "read-only opens do not exclude one another")
	defer second.Close()
	_, err = boltstore.Open(path, boltstore.Options{Timeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, boltstore.ErrLocked, "a reader keeps a writer out")

	ro, err := second.Store("executions")
	require.NoError(t, err)
	rec, err := ro.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "scheduling", rec.Status)
	require.Equal(t, written.Revision, rec.Revision)
	recs, bad, err := ro.List(bg)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, 1)

	_, err = ro.Create(bg, storage.Record{ID: "ex-2", Status: "pending"})
	require.ErrorIs(t, err, boltstore.ErrReadOnly)
	_, err = ro.CompareAndSwap(bg, "ex-1", rec.Revision, rec)
	require.ErrorIs(t, err, boltstore.ErrReadOnly)
	_, _, err = ro.Acquire(bg, "ex-1", storage.Lease{Holder: "cli", TTL: time.Minute})
	require.ErrorIs(t, err, boltstore.ErrReadOnly)
	after, err := ro.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec, after, "nothing was written")

	_, err = second.Store("simulators")
	require.ErrorIs(t, err, storage.ErrNotFound)

	ctx, cancel := context.WithCancel(bg)
	events, err := ro.Watch(ctx, 0)
	require.NoError(t, err)
	var ids []string
	for range 2 { // the creation and the move
		ids = append(ids, storagetest.Recv(t, events, "the read-only watch to replay the log").ID)
	}
	require.Equal(t, []string{"ex-1", "ex-1"}, ids)
	cancel()
	storagetest.Closed(t, events, "the watch to end with its context")

	_, err = boltstore.Open(filepath.Join(t.TempDir(), "missing"), boltstore.Options{ReadOnly: true})
	require.ErrorIs(t, err, os.ErrNotExist, "a reader never creates a file")
}

// childStore opens the executions store of path for a child process,
// which exits (or is killed) without closing it.
func childStore(path string) (*boltstore.Store, error) {
	db, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		return nil, err
	}
	// Checkpoint every few dozen writes, so that the kills land before,
	// during and after checkpoints and segment changes, not only while
	// everything is still in the first segment.
	db.CheckpointEvery(37)
	return db.Store("executions")
}

// childWriter creates ex-N and bumps the counter record to N in a loop,
// printing "ack N" only after both writes returned.
func childWriter(path string) int {
	s, err := childStore(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	counter, err := s.Get(bg, "counter")
	if err != nil {
		counter, err = s.Create(bg, storage.Record{ID: "counter", Status: "running", Meta: map[string]string{"n": "0"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	n, _ := strconv.Atoi(counter.Meta["n"])
	for {
		n++
		if _, err := s.Create(bg, storage.Record{ID: fmt.Sprintf("ex-%d", n), Status: "pending"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		next := counter.Clone()
		next.Meta["n"] = strconv.Itoa(n)
		counter, err = s.CompareAndSwap(bg, "counter", counter.Revision, next)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("ack %d\n", n)
	}
}

// A write acknowledged by the store survives a SIGKILL of the process
// that made it, at whatever moment the kill lands, and the file stays
// consistent.
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	lastAck := 0
	for round := range rounds {
		cmd, out := child(t, "writer", path)
		hung := watchdog(cmd, time.Minute)
		killAfter := 1 + rand.IntN(200)
		for out.Scan() {
			n, err := strconv.Atoi(strings.TrimPrefix(out.Text(), "ack "))
			require.NoError(t, err)
			require.Equal(t, lastAck+1, n, "round %d", round)
			lastAck = n
			if killAfter--; killAfter == 0 {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				break
			}
		}
		// Acks written before the kill may still be in the pipe.
		for out.Scan() {
			n, err := strconv.Atoi(strings.TrimPrefix(out.Text(), "ack "))
			require.NoError(t, err)
			lastAck = n
		}
		_ = cmd.Wait()
		require.False(t, hung(), "round %d: the writer stopped acknowledging for a minute", round)

		db, err := boltstore.Open(path, boltstore.Options{})
		require.NoError(t, err)
		require.NoError(t, db.Check(), "the file passes bbolt's consistency check")
		s, err := db.Store("executions")
		require.NoError(t, err)
		counter, err := s.Get(bg, "counter")
		require.NoError(t, err)
		n, err := strconv.Atoi(counter.Meta["n"])
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, lastAck, "every acknowledged counter write is there")
		for k := 1; k <= lastAck; k++ {
			_, err := s.Get(bg, fmt.Sprintf("ex-%d", k))
			require.NoError(t, err, "acknowledged ex-%d", k)
		}
		lastAck = n // an unacknowledged last write may have landed too
		require.NoError(t, db.Close())
	}
}

// Writers of childWriters: each shares its record with the next three, so
// batches mix writes that conflict with writes that do not.
const (
	concurrentWriters = 32
	writersPerRecord  = 4
)

// childWriters runs concurrentWriters goroutines, each counting up its own
// metadata key on a record it shares, by compare-and-swap, retried on
// conflict; it prints "ack <writer> <count>" after each acknowledged write.
func childWriters(path string) int {
	s, err := childStore(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	errs := make(chan error, concurrentWriters)
	for w := range concurrentWriters {
		go func() {
			id := fmt.Sprintf("shared-%d", w/writersPerRecord)
			key := fmt.Sprintf("w%d", w)
			for {
				rec, err := s.Get(bg, id)
				if errors.Is(err, storage.ErrNotFound) {
					rec, err = s.Create(bg, storage.Record{ID: id, Status: "running"})
				}
				if errors.Is(err, storage.ErrExists) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				n, _ := strconv.Atoi(rec.Meta[key])
				next := rec.Clone()
				if next.Meta == nil {
					next.Meta = map[string]string{}
				}
				next.Meta[key] = strconv.Itoa(n + 1)
				_, err = s.CompareAndSwap(bg, id, rec.Revision, next)
				var conflict *storage.ConflictError
				if errors.As(err, &conflict) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				fmt.Printf("ack %d %d\n", w, n+1) // one write(2) per line: lines never interleave
			}
		}()
	}
	fmt.Fprintln(os.Stderr, <-errs)
	return 1
}

// Group commit keeps the promise under load: with 32 writers whose
// writes share transactions (and conflict, a quarter of them on each
// record), every write acknowledged before a SIGKILL is in the file after
// it, and the file is consistent.
func TestAcknowledgedConcurrentWritesSurviveSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	acked := map[int]int{} // writer → highest count acknowledged
	total := 0
	for round := range rounds {
		cmd, out := child(t, "writers", path)
		hung := watchdog(cmd, time.Minute)
		killAfter := 50 + rand.IntN(2000)
		read := func() {
			var w, n int
			_, err := fmt.Sscanf(out.Text(), "ack %d %d", &w, &n)
			require.NoError(t, err, "round %d: %q", round, out.Text())
			require.Greater(t, n, acked[w], "writer %d counts up", w)
			acked[w] = n
			total++
		}
		for out.Scan() {
			read()
			if killAfter--; killAfter == 0 {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				break
			}
		}
		for out.Scan() { // acknowledged before the kill, still in the pipe
			read()
		}
		_ = cmd.Wait()
		require.False(t, hung(), "round %d: the writers stopped acknowledging for a minute", round)

		db, err := boltstore.Open(path, boltstore.Options{})
		require.NoError(t, err)
		require.NoError(t, db.Check(), "round %d: the file is consistent", round)
		s, err := db.Store("executions")
		require.NoError(t, err)
		for w, n := range acked {
			rec, err := s.Get(bg, fmt.Sprintf("shared-%d", w/writersPerRecord))
			require.NoError(t, err)
			got, _ := strconv.Atoi(rec.Meta[fmt.Sprintf("w%d", w)])
			require.GreaterOrEqual(t, got, n, "round %d: writer %d's acknowledged write %d is there", round, w, n)
			acked[w] = got // an unacknowledged last write may have landed too
		}
		require.NoError(t, db.Close())
	}
	t.Logf("%d acknowledged writes across %d SIGKILLs, none lost", total, rounds)
}

// corrupt writes raw bytes under id, behind the store's back.
func corrupt(t *testing.T, path, id string, data []byte) {
	t.Helper()
	raw, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("ns/executions")).Bucket([]byte("records")).Put([]byte(id), data)
	}))
}

func TestCorruptOrForeignRecordsAreReportedByIDAndNeverOverwritten(t *testing.T) {
	future, err := storagetest.Sample("ex-future").MarshalBinary()
	require.NoError(t, err)
	future[0] = 9
	other, err := storagetest.Sample("ex-other").MarshalBinary()
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		id   string
		data []byte
	}{
		"garbage":       {"ex-garbage", []byte("\x00\xff not a record")},
		"future format": {"ex-future", future},
		"empty":         {"ex-empty", []byte{}},
		"wrong id":      {"ex-wrong", other},
		"plain JSON":    {"ex-json", []byte(`{"id":"ex-json","status":"running"}`)},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			db, s := openStore(t, path, boltstore.Options{})
			good, err := s.Create(bg, storagetest.Sample(tc.id))
			require.NoError(t, err)
			require.NoError(t, db.Close())
			corrupt(t, path, tc.id, tc.data)

			_, s = openStore(t, path, boltstore.Options{})
			_, err = s.Get(bg, tc.id)
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.Contains(t, err.Error(), tc.id)
			recs, bad, err := s.List(bg)
			require.NoError(t, err, "one unreadable record does not fail the list")
			require.Empty(t, recs)
			require.Len(t, bad, 1)
			require.Equal(t, tc.id, bad[0].ID)
			require.ErrorIs(t, bad[0].Err, storage.ErrCorrupt)
			_, err = s.CompareAndSwap(bg, tc.id, good.Revision, storagetest.Sample(tc.id))
			require.ErrorIs(t, err, storage.ErrCorrupt, "a record that cannot be read is not overwritten")
			_, err = s.Create(bg, storagetest.Sample(tc.id))
			require.ErrorIs(t, err, storage.ErrExists)
		})
	}
}

func TestWatchFromACompactedRevisionDeliversEveryRecord(t *testing.T) {
	db, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{LogSize: 3})
	var last storage.Record
	for k := range 10 {
		rec, err := s.Create(bg, storagetest.Sample(fmt.Sprintf("ex-%d", k)))
		require.NoError(t, err)
		last = rec
	}
	// The file keeps LogSize writes once the write-ahead log is applied
	// to it (the log's own writes are all kept until then).
	require.NoError(t, db.Checkpoint())
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch, err := s.Watch(ctx, 1)
	require.NoError(t, err)
	seen := map[string]uint64{}
	for range 10 {
		ev := nextEvent(t, ch)
		seen[ev.ID] = ev.Revision
	}
	require.Len(t, seen, 10)
	require.Equal(t, last.Revision, seen[last.ID])
	rec, err := s.Create(bg, storagetest.Sample("ex-new"))
	require.NoError(t, err)
	require.Equal(t, storage.WatchEvent{ID: "ex-new", Revision: rec.Revision}, nextEvent(t, ch))
}

func TestWatchEndsWhenTheDBCloses(t *testing.T) {
	db, s := openStore(t, filepath.Join(t.TempDir(), "db"), boltstore.Options{})
	ch, err := s.Watch(bg, 0)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	select {
	case _, ok := <-ch:
		require.False(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("watch not closed with the DB")
	}
}

// Ownership lives in the process that holds the file: closing the DB ends
// every ownership (Lost closes, writes under it are fenced), a closed DB
// grants none, and the next process to open the file finds nothing held.
func TestCloseEndsOwnershipAndTheNextOpenFindsNothingHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, s := openStore(t, path, boltstore.Options{})
	_, err := s.Create(context.Background(), storagetest.Unowned("ex-1"))
	require.NoError(t, err)
	own, _, err := s.Acquire(context.Background(), "ex-1", storagetest.Lease("pod-a"))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	select {
	case <-own.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost was not closed when the DB closed")
	}
	_, _, err = s.Acquire(context.Background(), "ex-1", storagetest.Lease("pod-b"))
	require.ErrorIs(t, err, boltstore.ErrClosed)

	_, s2 := openStore(t, path, boltstore.Options{})
	own2, rec, err := s2.Acquire(context.Background(), "ex-1", storagetest.Lease("pod-b"))
	require.NoError(t, err, "the process that held pod-a's ownership is gone")
	require.NoError(t, own2.Release(context.Background()))
	require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, storage.Claim{Owner: rec.Owner, Epoch: rec.Epoch})
}

// Zero values are not usable and say so, instead of panicking on nil.
func TestZeroDBAndStoreFailWithAnError(t *testing.T) {
	var db boltstore.DB
	require.ErrorContains(t, db.Close(), "Open")
	require.ErrorContains(t, db.Check(), "Open")
	_, err := db.Store("executions")
	require.ErrorContains(t, err, "Open")

	storagetest.Unusable(t, &boltstore.Store{}, "DB.Store")
}

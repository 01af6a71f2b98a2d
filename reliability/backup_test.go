package reliability_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// BenchmarkBackupUnderLoad is a backup of a store that has run for
// years taken while its controllers work: EXECFSM_BACKUP_ENDED ended
// executions (default 1000000) and the load of EXECFSM_LOAD (default
// 10000x100) moving the live ones, the backup (bbolt: DB.Backup; etcd:
// etcdstore.Snapshot, restored into a new cluster) taken when the load
// is half done. The restored store is compared with the source at the
// backup's revision, every record and trail (the ended ones with the
// source, which the load leaves alone; the live ones with the last write
// of each the store acknowledged at or before that revision), then a
// controller (a child process) opens it and recovers every live
// execution in it. It reports backup-ms and backup-MiB, restore-ms (the
// new etcd cluster started from the snapshot; a bbolt backup is the
// store), and recovered-ms: the controller back in line.
//
//	EXECFSM_BACKUP_ENDED=100000 EXECFSM_LOAD=2000x50 go test ./reliability -run '^$' -bench BackupUnderLoad -benchtime 1x
func BenchmarkBackupUnderLoad(b *testing.B) {
	ended := envCount(b, "EXECFSM_BACKUP_ENDED", 1_000_000)
	executions, steps := loadSize(b)
	for _, backend := range []string{"bolt", "etcd"} {
		b.Run(fmt.Sprintf("%s/%d-ended/%dx%d", backend, ended, executions, steps), func(b *testing.B) {
			var sum backupMeasure
			for range b.N {
				m := backupUnderLoad(b, backend, ended, executions, steps)
				sum.backup += m.backup
				sum.bytes += m.bytes
				sum.restore += m.restore
				sum.recovered += m.recovered
			}
			n := float64(b.N)
			b.ReportMetric(float64(sum.backup.Milliseconds())/n, "backup-ms")
			b.ReportMetric(float64(sum.bytes)/n/(1<<20), "backup-MiB")
			b.ReportMetric(float64(sum.restore.Milliseconds())/n, "restore-ms")
			b.ReportMetric(float64(sum.recovered.Milliseconds())/n, "recovered-ms")
		})
	}
}

// TestABackupUnderTheLoadRestoresAndRecovers is BenchmarkBackupUnderLoad
// at a size CI affords, so that the benchmark's comparison and recovery
// are known to hold before a run of record.
func TestABackupUnderTheLoadRestoresAndRecovers(t *testing.T) {
	for _, backend := range []string{"bolt", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			m := backupUnderLoad(t, backend, 300, 100, 20)
			t.Logf("backup %v (%d bytes), restore %v, recovered %v", m.backup, m.bytes, m.restore, m.recovered)
		})
	}
}

// loadSize is EXECFSM_LOAD (EXECUTIONSxSTEPS), default 10000x100.
func loadSize(b *testing.B) (executions, steps int) {
	executions, steps = 10000, 100
	if v := os.Getenv("EXECFSM_LOAD"); v != "" {
		if _, err := fmt.Sscanf(v, "%dx%d", &executions, &steps); err != nil {
			b.Fatalf("EXECFSM_LOAD=%q: want EXECUTIONSxSTEPS: %v", v, err)
		}
	}
	return executions, steps
}

// backupMeasure is what one backup under load took.
type backupMeasure struct {
	backup, restore, recovered time.Duration
	bytes                      int64
}

// backupSide is one store's way to back up, restore and hand the
// restored store to a child controller.
type backupSide struct {
	source storage.Store
	// backup writes the backup to path and returns its revision and
	// size.
	backup func(ctx context.Context, path string) (uint64, int64, error)
	// restore makes a store from the backup at path and returns it and
	// the spec of a child recovering over it; done lets go of the
	// test's hold on it (a bbolt file is locked by one process).
	restore func(path string) (restored storage.Store, child childSpec, done func())
}

// backupUnderLoad makes the store, runs the load, backs up at its half
// way, compares and recovers (BenchmarkBackupUnderLoad).
func backupUnderLoad(t testing.TB, backend string, ended, executions, steps int) backupMeasure {
	t.Helper()
	dir := t.TempDir()
	side := newBackupSide(t, backend, dir)
	_, err := schema.Save(context.Background(), side.source, "teraslice", teraslice.Roles())
	require.NoError(t, err)
	makeEnded(t, side.source, ended)

	acked := &acknowledged{history: map[string][]storagetest.Written{}, half: executions * steps / 2, halfway: make(chan struct{})}
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		runLoad(t, acked.wrap(side.source), "live", executions, steps, 32)
	}()
	select {
	case <-acked.halfway:
	case <-loaded:
		t.Fatal("the load ended before it was half done")
	}
	path := filepath.Join(dir, "backup.db")
	start := time.Now()
	revision, size, err := side.backup(context.Background(), path)
	took := time.Since(start)
	require.NoError(t, err)
	acked.cut(revision)
	select {
	case <-loaded:
	case <-time.After(30 * time.Minute):
		t.Fatal("the load did not finish within 30 minutes of the backup")
	}
	if t.Failed() {
		t.FailNow() // the load failed on its own goroutine
	}

	start = time.Now()
	restored, child, done := side.restore(path)
	restoring := time.Since(start)
	live := requireStoreAsOf(t, side.source, restored, storagetest.AsOf(acked.history, revision), ended)
	require.Equal(t, executions, live, "every live execution made before the load is in the backup")
	done()

	child.Role, child.LiveOnly = "recover", true
	res, recovering := runRecoveryChild(t, child)
	require.Equal(t, executions, res.Executions, "the controller over the restored store adopted every live execution")
	require.Equal(t, int64(executions), res.Reconciled, "and reconciled each once")
	return backupMeasure{backup: took, bytes: size, restore: restoring, recovered: recovering - time.Duration(res.AfterIdleNS)}
}

// newBackupSide is a fresh store of backend and its backup and restore.
func newBackupSide(t testing.TB, backend, dir string) backupSide {
	switch backend {
	case "bolt":
		db, err := boltstore.Open(filepath.Join(dir, "db"), boltstore.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		s, err := db.Store("executions")
		require.NoError(t, err)
		return backupSide{
			source: s,
			backup: func(ctx context.Context, path string) (uint64, int64, error) {
				info, err := db.Backup(ctx, path)
				return info.Revision, info.Bytes, err
			},
			restore: func(path string) (storage.Store, childSpec, func()) {
				restored, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
				require.NoError(t, err)
				rs, err := restored.Store("executions")
				require.NoError(t, err)
				return rs, childSpec{BoltPath: path}, func() { require.NoError(t, restored.Close()) }
			},
		}
	case "etcd":
		// A cluster of its own that compacts its history, as a
		// production etcd does, with room for a million ended records
		// and the load's writes between two compactions: etcd's default
		// 2 GiB quota refused the load's writes half way.
		source, err := embedded.Start(filepath.Join(dir, "source"), 1, embedded.Options{Compaction: 10 * time.Second, QuotaBytes: 8 << 30})
		require.NoError(t, err)
		t.Cleanup(source.Close)
		cl, err := source.Client()
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.Close() })
		const prefix = "/backup/"
		s, err := etcdstore.New(cl, etcdstore.Options{Prefix: prefix})
		require.NoError(t, err)
		return backupSide{
			source: s,
			backup: func(ctx context.Context, path string) (uint64, int64, error) {
				info, err := etcdstore.Snapshot(ctx, cl, path)
				return uint64(info.Revision), info.Bytes, err
			},
			restore: func(path string) (storage.Store, childSpec, func()) {
				cluster, err := embedded.Start(filepath.Join(dir, "restored"), 1, embedded.Options{Snapshot: path, QuotaBytes: 8 << 30})
				require.NoError(t, err)
				t.Cleanup(cluster.Close)
				cl, err := cluster.Client()
				require.NoError(t, err)
				t.Cleanup(func() { _ = cl.Close() })
				rs, err := etcdstore.New(cl, etcdstore.Options{Prefix: prefix})
				require.NoError(t, err)
				return rs, childSpec{Etcd: cluster.Endpoints(), Prefix: prefix}, func() {}
			},
		}
	}
	t.Fatalf("no store %q", backend)
	return backupSide{}
}

// acknowledged keeps every write of the load a store acknowledged, by
// id, until the backup's revision is known, and from then on only those
// at or before it (a write acknowledged after the backup returned may
// still be older than it): what the backup is compared with, in half
// the memory of the whole load.
type acknowledged struct {
	mu       sync.Mutex
	history  map[string][]storagetest.Written
	writes   int
	half     int
	halfway  chan struct{}
	revision uint64 // 0 until cut
}

func (a *acknowledged) add(rec storage.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes++
	if a.writes == a.half {
		close(a.halfway)
	}
	if a.revision != 0 && rec.Revision > a.revision {
		return
	}
	a.history[rec.ID] = append(a.history[rec.ID], storagetest.Written{Revision: rec.Revision, Record: rec})
}

// cut forgets what was written after revision.
func (a *acknowledged) cut(revision uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revision = revision
	for id, ws := range a.history {
		kept := ws[:0]
		for _, w := range ws {
			if w.Revision <= revision {
				kept = append(kept, w)
			}
		}
		a.history[id] = kept
	}
}

// wrap is s telling a of every record it acknowledges (created or
// swapped).
func (a *acknowledged) wrap(s storage.Store) storage.Store {
	return recordingStore{Store: s, acked: a}
}

// recordingStore is a store whose acknowledged writes are kept.
type recordingStore struct {
	storage.Store
	acked *acknowledged
}

func (s recordingStore) Create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	out, err := s.Store.Create(ctx, rec)
	if err == nil {
		s.acked.add(out)
	}
	return out, err
}

func (s recordingStore) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	out, err := s.Store.CompareAndSwap(ctx, id, expect, next)
	if err == nil {
		s.acked.add(out)
	}
	return out, err
}

// requireStoreAsOf requires restored to hold exactly the source's ended
// records, as they are (the load never touches them), and the live ones
// of want (the source at the backup's revision), each encoded alike, the
// table too. It reads both a page at a time, in the order of their ids
// ("ended-" before "live-"), and returns how many live records it
// compared.
func requireStoreAsOf(t testing.TB, source, restored storage.Store, want map[string]storage.Record, ended int) int {
	t.Helper()
	ctx := context.Background()
	sourceTable, sourceAt, err := source.(storage.TableKeeper).Table(ctx)
	require.NoError(t, err)
	restoredTable, restoredAt, err := restored.(storage.TableKeeper).Table(ctx)
	require.NoError(t, err)
	require.Equal(t, string(sourceTable), string(restoredTable), "the recorded table came along")
	require.Equal(t, sourceAt, restoredAt, "at its revision")

	nextEnded, stop := iter.Pull2(pages(ctx, source.(storage.PageLister), "completed"))
	defer stop()
	var endedSeen, liveSeen int
	for rec, err := range pages(ctx, restored.(storage.PageLister)) {
		require.NoError(t, err, "the restored store's listing")
		if strings.HasPrefix(rec.ID, "ended-") {
			endedSeen++
			orig, err, ok := nextEnded()
			require.True(t, ok, "the backup holds %s, which the source never had", rec.ID)
			require.NoError(t, err, "the source's listing")
			require.Equal(t, storagetest.Encoded(t, orig), storagetest.Encoded(t, rec), "ended record %s", rec.ID)
			continue
		}
		liveSeen++
		w, ok := want[rec.ID]
		require.True(t, ok, "the backup holds %s, which the source did not at the backup's revision", rec.ID)
		require.Equal(t, storagetest.Encoded(t, w), storagetest.Encoded(t, rec), "live record %s as of the backup's revision", rec.ID)
	}
	require.Equal(t, ended, endedSeen, "every ended record is in the backup")
	require.Len(t, want, liveSeen, "every live record the source held at the backup's revision is in the backup")
	return liveSeen
}

// pages is every record of l in the given statuses (none: all), read a
// page of livePage at a time; an unreadable record is an error.
func pages(ctx context.Context, l storage.PageLister, statuses ...string) iter.Seq2[storage.Record, error] {
	return func(yield func(storage.Record, error) bool) {
		q := storage.Query{Statuses: statuses, Limit: livePage}
		for {
			page, err := l.ListPage(ctx, q)
			if err == nil && len(page.Unreadable) > 0 {
				err = fmt.Errorf("%d unreadable records, the first %s: %w", len(page.Unreadable), page.Unreadable[0].ID, page.Unreadable[0].Err)
			}
			if err != nil {
				yield(storage.Record{}, err)
				return
			}
			for _, rec := range page.Records {
				if !yield(rec, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			q.Cursor = page.Next
		}
	}
}

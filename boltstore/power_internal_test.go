package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// errPowerCut is what every file operation returns once the power is cut.
var errPowerCut = errors.New("power cut")

// powerFS is a wal.FS that plays a power cut. For every file it keeps
// what was flushed and what was written since, and for the directory
// which entries were flushed. At the cut every later call fails, and
// afterwards it draws one of the states a disk may have been left in:
// flushed bytes kept; of the bytes written since, each sector there or
// zeros (pages reordered within an unflushed range come down to that),
// the file's size anywhere from its flushed size to its written one; a
// file created or removed since the directory was last flushed there
// or not.
type powerFS struct {
	mu      sync.Mutex
	dir     string
	entries map[string]*powerFile // the directory now
	synced  map[string]*powerFile // as last flushed
	cut     bool
	// cutAt, if positive, is how many file operations succeed before the
	// power goes on its own: a cut lands between any two of them, a
	// write and its flush included.
	cutAt int
	ops   int
}

// down reports whether the power is out, cutting it first if this
// operation is the one it goes at; p.mu is held.
func (p *powerFS) down() bool {
	p.ops++
	if p.cutAt > 0 && p.ops > p.cutAt {
		p.cut = true
	}
	return p.cut
}

type powerFile struct {
	fs      *powerFS
	durable []byte // as of its last flush
	current []byte
}

// newPowerFS returns a powerFS holding the log files now in dir, as
// flushed: the log an earlier life of the database left there.
func newPowerFS(t *testing.T, dir string) *powerFS {
	t.Helper()
	p := &powerFS{dir: dir, entries: map[string]*powerFile{}, synced: map[string]*powerFile{}}
	found, err := filepath.Glob(filepath.Join(dir, "*"+wal.Suffix+"*"))
	require.NoError(t, err)
	for _, name := range found {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		f := &powerFile{fs: p, durable: data, current: slices.Clone(data)}
		p.entries[filepath.Base(name)], p.synced[filepath.Base(name)] = f, f
	}
	return p
}

// enter begins an operation on name, p.mu held: it fails once the
// power is out, and returns name's entry in the directory.
func (p *powerFS) enter(name string) (string, error) {
	if p.down() {
		return "", errPowerCut
	}
	if filepath.Dir(name) != p.dir {
		return "", fmt.Errorf("powerFS holds %s only, not %s", p.dir, name)
	}
	return filepath.Base(name), nil
}

func (p *powerFS) Create(name string, _ os.FileMode) (wal.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, err := p.enter(name)
	if err != nil {
		return nil, err
	}
	if p.entries[k] != nil {
		return nil, fs.ErrExist
	}
	f := &powerFile{fs: p}
	p.entries[k] = f
	return f, nil
}

func (p *powerFS) ReadFile(name string) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, err := p.enter(name)
	if err != nil {
		return nil, err
	}
	f := p.entries[k]
	if f == nil {
		return nil, fs.ErrNotExist
	}
	return slices.Clone(f.current), nil
}

func (p *powerFS) ReadDir(dir string) ([]os.DirEntry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down() {
		return nil, errPowerCut
	}
	if dir != p.dir && dir != p.dir+string(filepath.Separator) {
		return nil, fmt.Errorf("powerFS holds %s only, not %s", p.dir, dir)
	}
	var out []os.DirEntry
	for name := range p.entries {
		out = append(out, dirEntry(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (p *powerFS) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, err := p.enter(name)
	if err != nil {
		return err
	}
	if p.entries[k] == nil {
		return fs.ErrNotExist
	}
	delete(p.entries, k)
	return nil
}

func (p *powerFS) SyncDir(dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down() {
		return errPowerCut
	}
	p.synced = maps.Clone(p.entries)
	return nil
}

func (p *powerFS) Named(f wal.File, name string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, err := p.enter(name)
	if err != nil {
		return false, err
	}
	return p.entries[k] == f, nil
}

func (f *powerFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.down() {
		return 0, errPowerCut
	}
	if end := off + int64(len(b)); end > int64(len(f.current)) {
		f.current = append(f.current, make([]byte, end-int64(len(f.current)))...)
	}
	copy(f.current[off:], b)
	return len(b), nil
}

func (f *powerFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.down() {
		return errPowerCut
	}
	f.current = f.current[:min(size, int64(len(f.current)))]
	return nil
}

func (f *powerFile) Datasync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.down() {
		return errPowerCut
	}
	f.durable = slices.Clone(f.current)
	return nil
}

func (f *powerFile) Close() error { return nil }

// cutPower makes every later call fail.
func (p *powerFS) cutPower() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// leftOnDisk draws, with rng, one state the disk may have been left in
// at the cut, and writes it to the real directory.
func (p *powerFS) leftOnDisk(t *testing.T, rng *rand.Rand) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	stale, err := filepath.Glob(filepath.Join(p.dir, "*"+wal.Suffix+"*"))
	require.NoError(t, err)
	for _, name := range stale {
		require.NoError(t, os.Remove(name))
	}
	names := map[string]bool{}
	for k := range p.entries {
		names[k] = true
	}
	for k := range p.synced {
		names[k] = true
	}
	for k := range names {
		now, flushed := p.entries[k], p.synced[k]
		f := now
		switch {
		case now == flushed:
		case now != nil && flushed == nil, now == nil && flushed != nil:
			// Created, or removed, since the directory was flushed: the
			// disk has the new directory or the old one.
			f = []*powerFile{now, flushed}[rng.IntN(2)]
		default: // replaced by another file of the same name
			f = []*powerFile{now, flushed}[rng.IntN(2)]
		}
		if f == nil {
			continue
		}
		require.NoError(t, os.WriteFile(filepath.Join(p.dir, k), f.torn(rng), 0o600))
	}
}

// torn is the file's bytes as a power cut may leave them.
func (f *powerFile) torn(rng *rand.Rand) []byte {
	const sector = 512
	out := slices.Clone(f.durable)
	if len(f.current) <= len(f.durable) {
		return out
	}
	size := len(f.durable) + rng.IntN(len(f.current)-len(f.durable)+1)
	zeroAll := rng.IntN(4) == 0 // the size flushed, none of the data
	for off := len(f.durable); off < size; {
		end := min(size, (off/sector+1)*sector)
		if zeroAll || rng.IntN(3) == 0 {
			out = append(out, make([]byte, end-off)...)
		} else {
			out = append(out, f.current[off:end]...)
		}
		off = end
	}
	return out
}

type dirEntry string

func (d dirEntry) Name() string               { return string(d) }
func (d dirEntry) IsDir() bool                { return false }
func (d dirEntry) Type() fs.FileMode          { return 0 }
func (d dirEntry) Info() (fs.FileInfo, error) { return nil, errors.New("powerFS: no file info") }

// powerCuts is how many cuts TestAcknowledgedWritesSurvivePowerCuts
// plays: EXECFSM_POWER_CUTS, or a few in CI.
func powerCuts(t *testing.T) int {
	if v := os.Getenv("EXECFSM_POWER_CUTS"); v != "" { // go test ./boltstore -run PowerCuts -timeout 1h
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	if testing.Short() {
		return 50
	}
	return 200
}

// Writers create and update records, checkpoints run every few dozen
// writes, and the power is cut at a random moment. Whatever state the
// disk is left in (drawn at random from those a disk may leave), the
// database opens; every acknowledged write is there (the record at its
// acknowledged revision or a later one); every record reads whole; and
// the revisions handed out after go on above every one seen before.
func TestAcknowledgedWritesSurvivePowerCuts(t *testing.T) {
	cuts := powerCuts(t)
	var checked, writes, inOpen atomic.Int64
	for round := range cuts {
		seed := uint64(round)
		rng := rand.New(rand.NewPCG(seed, 27))
		dir := t.TempDir()
		path := filepath.Join(dir, "db")
		var (
			mu    sync.Mutex
			acked = map[string]uint64{} // id → the last acknowledged revision
			total atomic.Int64
			wg    sync.WaitGroup
		)
		// Every other round starts where an earlier life, killed, left
		// its log, so that Open's replay, its new segment and log-from
		// are caught by the cut too.
		if round%2 == 1 {
			earlier, err := Open(path, Options{})
			require.NoError(t, err)
			es, err := earlier.Store("executions")
			require.NoError(t, err)
			for k := range 1 + rng.IntN(30) {
				rec, err := es.Create(context.Background(), storage.Record{ID: fmt.Sprint("earlier-", k), Status: "running"})
				require.NoError(t, err)
				acked[rec.ID] = rec.Revision
			}
			earlier.Crash()
		}
		pfs := newPowerFS(t, dir)
		pfs.cutAt = 1 + rng.IntN(600)
		db, err := open(path, Options{}, pfs)
		if err != nil {
			require.ErrorIs(t, err, errPowerCut, "round %d", round) // the power went during Open
			inOpen.Add(1)
		} else {
			db.checkpointWrites = 7 + rng.IntN(40)
			s, err := db.Store("executions")
			require.NoError(t, err)
			const writers = 6
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids := []string{fmt.Sprint("w", w, "-a"), fmt.Sprint("w", w, "-b"), fmt.Sprint("w", w, "-c")}
					last := map[string]storage.Record{}
					for n := 0; ; n++ {
						id := ids[n%len(ids)]
						var rec storage.Record
						var err error
						if prev, ok := last[id]; ok {
							next := prev.Clone()
							next.Reason = fmt.Sprint("write ", n)
							rec, err = s.CompareAndSwap(context.Background(), id, prev.Revision, next)
						} else {
							rec, err = s.Create(context.Background(), storage.Record{ID: id, Status: "running", Reason: "created"})
						}
						if err != nil {
							return // the power is out
						}
						last[id] = rec
						mu.Lock()
						acked[id] = rec.Revision
						mu.Unlock()
						total.Add(1)
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				pfs.cutPower()
				t.Fatalf("round %d: the writers did not stop after the cut", round)
			}
			db.Crash()
		}
		pfs.leftOnDisk(t, rng)
		writes.Add(total.Load())

		reopened, err := Open(path, Options{})
		require.NoError(t, err, "round %d (seed %d): a state a power cut can leave is refused", round, seed)
		rs, err := reopened.Store("executions")
		require.NoError(t, err)
		recs, unreadable, err := rs.List(context.Background())
		require.NoError(t, err)
		require.Empty(t, unreadable, "round %d: a record reads half-written", round)
		var highest uint64
		got := map[string]storage.Record{}
		for _, r := range recs {
			got[r.ID] = r
			highest = max(highest, r.Revision)
		}
		mu.Lock()
		for id, rev := range acked {
			r, ok := got[id]
			require.True(t, ok, "round %d: %s, acknowledged at revision %d, is gone", round, id, rev)
			require.GreaterOrEqual(t, r.Revision, rev, "round %d: %s went back before an acknowledged write", round, id)
			highest = max(highest, rev)
			checked.Add(1)
		}
		mu.Unlock()
		next, err := rs.Create(context.Background(), storage.Record{ID: "after", Status: "running"})
		require.NoError(t, err)
		require.Greater(t, next.Revision, highest, "round %d: a revision came round again", round)
		require.NoError(t, reopened.Check(), "round %d", round)
		require.NoError(t, reopened.Close())
	}
	t.Logf("%d power cuts (%d during Open), %d acknowledged writes, the last of each of %d records checked",
		cuts, inOpen.Load(), writes.Load(), checked.Load())
}

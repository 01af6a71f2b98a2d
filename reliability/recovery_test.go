package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// recoveryResult is what a recovering child reports on its stdout.
type recoveryResult struct {
	Executions int   `json:"executions"`
	Reconciled int64 `json:"reconciled"`
	OpenNS     int64 `json:"open_ns"`  // from its start until the store is open
	ListNS     int64 `json:"list_ns"`  // until the adoption pass has listed
	AdoptNS    int64 `json:"adopt_ns"` // until it has adopted every execution
	IdleNS     int64 `json:"idle_ns"`  // until every execution is reconciled once
	// HeapBytes is the live heap once every execution is reconciled (after
	// a collection): the handles, their records and the Loop's keys.
	HeapBytes uint64 `json:"heap_bytes"`
	// EncodedBytes is the size of one record as stored.
	EncodedBytes int `json:"encoded_bytes"`
	// AfterIdleNS is how long the child took after IdleNS: measuring
	// its heap, the admin's first page, stopping and closing its store
	// (which, verified in the background, waits for the walk). The parent
	// takes it off the time it saw: the controller was back in line.
	AfterIdleNS int64 `json:"after_idle_ns"`
	// CPU is the CPU time (user and system) the child process used, as
	// its parent saw it: beside the wall time, it tells a recovery that
	// worked from one that waited (on its store's server, or on a
	// machine whose memory or CPU was not there when asked).
	CPU time.Duration `json:"-"`
	// PeakRSS is the most memory the child process had resident at
	// once, as it read it from /proc/self/status (VmHWM; 0 where there is
	// none): what it touched, which a machine charges for at its first
	// touch (BenchmarkFirstTouch). Not the parent's rusage: Go starts a
	// child with vfork, and Linux counts the parent's peak, whose memory
	// the child ran in until its exec, in the child's ru_maxrss.
	PeakRSS int64 `json:"peak_rss"`
	// AdminFirstPageNS is how long the admin handler took to serve its
	// first page (LiveOnly recoveries), the median of a few.
	AdminFirstPageNS int64 `json:"admin_first_page_ns,omitempty"`
}

// childRecover is a controller starting over the executions of a store:
// it opens the store, lists every record as the adoption pass does,
// adopts each (a handle per execution, as a controller keeps them, a
// core at a time) and
// reconciles each once (finding nothing to do), with 32 workers, then
// reports and exits. Each handle is handed the record the listing read
// (Persisted.Prime), as an informer's cache serves a Kubernetes
// controller, unless spec.ReadEach: then every reconcile reads its
// record from the store first, as a handle that was told nothing does.
//
// With spec.MemoryWarm it recovers twice and reports the second time,
// all of it let go in between: the same work in a process whose heap
// pages are already touched, which tells what a recovery costs where
// memory is not charged at its first touch (see BenchmarkFirstTouch).
func childRecover(ctx context.Context, spec childSpec) error {
	if path := os.Getenv("EXECFSM_RECOVERY_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("EXECFSM_RECOVERY_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	if spec.MemoryWarm {
		if _, err := recoverOnce(ctx, spec); err != nil {
			return err
		}
		runtime.GC()
	}
	res, err := recoverOnce(ctx, spec)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// recoverOnce is one recovery of childRecover's.
func recoverOnce(ctx context.Context, spec childSpec) (recoveryResult, error) {
	start := time.Now()
	store, closeStore, err := childStore(spec)
	if err != nil {
		return recoveryResult{}, err
	}
	defer closeStore()
	res := recoveryResult{OpenNS: int64(time.Since(start))}
	var mu sync.Mutex
	handles := map[string]*transition.Persisted[state.Status]{}
	var listed []storage.Record // by ID; one is zeroed once adopted
	var listedBy, adoptedBy atomic.Int64
	var reconciled atomic.Int64
	adopter := reconcile.AdopterFunc[string](func(ctx context.Context, item reconcile.Item[string]) error {
		p, err := transition.NewPersisted(teraslice.Lifecycle(), store, item.Key, transition.PersistedOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		handles[item.Key] = p
		at, ok := slices.BinarySearchFunc(listed, item.Key, func(rec storage.Record, id string) int { return strings.Compare(rec.ID, id) })
		var rec storage.Record
		if ok {
			rec = listed[at]
			listed[at] = storage.Record{ID: rec.ID} // let go of the rest: it is the handle's now
		}
		mu.Unlock()
		if ok && !spec.ReadEach {
			return p.Prime(ctx, rec)
		}
		return nil
	})
	reconciler := reconcile.ReconcilerFunc[string](func(ctx context.Context, key string) (reconcile.Result, error) {
		mu.Lock()
		p := handles[key]
		mu.Unlock()
		if p == nil {
			return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("%s was never adopted", key))
		}
		_, _, err := p.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
			return transition.To(cur), nil // the world agrees: nothing to write
		})
		if err == nil {
			reconciled.Add(1)
		}
		return reconcile.Result{}, err
	})
	// One watch, opened after the listing from the newest revision it
	// read, feeds the Loop what changes from then on, as a controller's
	// does; it is open while the heap is measured.
	events := make(chan string)
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer func() { stopWatch(); watching.Wait() }()
	list := func(ctx context.Context) ([]reconcile.Item[string], error) {
		var recs []storage.Record
		var unreadable []storage.Unreadable
		var err error
		if spec.LiveOnly {
			recs, unreadable, err = storage.ListAll(ctx, store.(storage.PageLister), livePage, teraslice.Lifecycle().LiveStatuses()...)
		} else {
			recs, unreadable, err = store.List(ctx)
		}
		if err != nil {
			return nil, err
		}
		if len(unreadable) > 0 {
			return nil, fmt.Errorf("%d unreadable records", len(unreadable))
		}
		var newest uint64
		for _, rec := range recs {
			newest = max(newest, rec.Revision)
		}
		changed, err := reconcile.StoreEvents(watchCtx, store, reconcile.StoreEventsOptions{From: newest})
		if err != nil {
			return nil, err
		}
		watching.Add(1)
		go func() {
			defer watching.Done()
			for id := range changed {
				select {
				case events <- id:
				case <-watchCtx.Done():
					return
				}
			}
		}()
		if !slices.IsSortedFunc(recs, func(a, b storage.Record) int { return strings.Compare(a.ID, b.ID) }) {
			return nil, fmt.Errorf("the listing is not in the order of its IDs, as storage.Lister promises")
		}
		items := make([]reconcile.Item[string], len(recs))
		for k, rec := range recs {
			items[k] = reconcile.Item[string]{Key: rec.ID, Identity: reconcile.Identity{Labels: rec.Meta}}
		}
		mu.Lock()
		listed = recs
		if len(handles) == 0 {
			handles = make(map[string]*transition.Persisted[state.Status], len(recs))
		}
		mu.Unlock()
		listedBy.Store(int64(time.Since(start)))
		return items, nil
	}
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Reconciler: reconciler, Adopter: adopter, World: list, Events: events, Resync: -1, Workers: 32,
		AdoptWorkers: runtime.GOMAXPROCS(0), // the adopter takes its lock only for the maps
		AdoptionObserver: reconcile.AdoptionObserverFunc[string](func(reconcile.AdoptionReport[string]) {
			adoptedBy.Store(int64(time.Since(start)))
		}),
	})
	if err != nil {
		return recoveryResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	if err := loop.Idle(ctx); err != nil {
		return recoveryResult{}, err
	}
	res.IdleNS = int64(time.Since(start))
	idle := time.Now()
	res.ListNS = listedBy.Load()
	res.AdoptNS = adoptedBy.Load()
	res.Reconciled = reconciled.Load()
	res.Executions = len(handles)
	for _, p := range handles {
		_, rec, err := p.Load(ctx)
		if err != nil {
			return recoveryResult{}, err
		}
		raw, err := rec.MarshalBinary()
		if err != nil {
			return recoveryResult{}, err
		}
		res.EncodedBytes = len(raw)
		break
	}
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	res.HeapBytes = mem.HeapAlloc
	res.PeakRSS = peakRSS()

	runtime.KeepAlive(handles)
	runtime.KeepAlive(loop)
	if spec.LiveOnly {
		if res.AdminFirstPageNS, err = adminFirstPage(ctx, store); err != nil {
			return recoveryResult{}, err
		}
	}
	stopWatch()
	cancel()
	if err := <-done; err != nil {
		return recoveryResult{}, err
	}
	if errs := loop.Stats().Errors; errs != 0 {
		return recoveryResult{}, fmt.Errorf("%d reconciles failed", errs)
	}
	watching.Wait() // stopped above: the watch ends before the store closes
	closeStore()    // again by the defer, which does nothing then
	res.AfterIdleNS = int64(time.Since(idle))
	return res, nil
}

// The recovering controller BenchmarkRecovery times, at a size CI
// affords, on every store: every execution adopted and reconciled once,
// with its watch open.
func TestARestartedControllerAdoptsAndReconcilesEveryExecution(t *testing.T) {
	const n = 300
	for _, backend := range []string{"bolt", "etcd", "kube"} {
		t.Run(backend, func(t *testing.T) {
			res, _ := runRecoveryChild(t, recoveryOver(t, backend, n))
			require.Equal(t, n, res.Executions, "every execution adopted")
			require.Equal(t, int64(n), res.Reconciled, "and reconciled once")
			require.Positive(t, res.HeapBytes)
		})
	}
}

// recoveryOver makes n executions in a new store of backend's and
// returns the spec of a child that recovers over them.
func recoveryOver(tb testing.TB, backend string, n int) childSpec {
	spec := childSpec{Role: "recover"}
	switch backend {
	case "bolt":
		spec.BoltPath = filepath.Join(tb.TempDir(), "db")
		db, err := boltstore.Open(spec.BoltPath, boltstore.Options{})
		require.NoError(tb, err)
		s, err := db.Store("executions")
		require.NoError(tb, err)
		makeExecutions(tb, s, n)
		require.NoError(tb, db.Close()) // the child takes the file's lock
	case "etcd":
		s, prefix := etcdStore(tb)
		spec.Prefix, spec.Etcd = prefix, shared.Endpoints()
		makeExecutions(tb, s, n)
	case "kube":
		s, kspec := kubeStore(tb)
		spec.Kube = &kspec
		makeExecutions(tb, s, n)
	default:
		tb.Fatalf("no store %q", backend)
	}
	return spec
}

// recoverySizes are the numbers of executions BenchmarkRecovery restarts
// over on each store: EXECFSM_RECOVERY, comma-separated (default
// 1000,10000,100000), on both, EXECFSM_RECOVERY_BOLT (default none)
// on bbolt alone: etcd's default 2 GB quota does not hold 1M records of
// 3 KB, and EXECFSM_RECOVERY_KUBE (default 1000,10000) on the kube
// store: its ConfigMaps go through the API server into an etcd that
// holds every key of the cluster.
func recoverySizes(b *testing.B) []recoverySize {
	var sizes []recoverySize
	for _, env := range []struct {
		name, fallback string
		stores         []string
	}{
		{"EXECFSM_RECOVERY", "1000,10000,100000", []string{"bolt", "etcd"}},
		{"EXECFSM_RECOVERY_BOLT", "", []string{"bolt"}},
		{"EXECFSM_RECOVERY_KUBE", "1000,10000", []string{"kube"}},
	} {
		raw := os.Getenv(env.name)
		if raw == "" {
			raw = env.fallback
		}
		if raw == "" {
			continue
		}
		for _, f := range strings.Split(raw, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want sizes like 1000,10000", env.name, raw)
			}
			for _, store := range env.stores {
				sizes = append(sizes, recoverySize{store, n})
			}
		}
	}
	return sizes
}

// recoverySize is one store and number of executions to recover over.
type recoverySize struct {
	store string
	n     int
}

// BenchmarkRecovery is a controller restarted over n executions: the
// time from starting its process until its adoption pass is done (the
// store opened, every record listed, every execution adopted and
// reconciled once), on bbolt and on etcd, two ways over the same
// executions: "listed" hands each handle the record the listing read
// (Persisted.Prime), "read-each" reads every record again in its
// reconcile (and on the kube store, whose executions are ConfigMaps
// listed in pages through the API server); on bbolt, "listed-memory-warm" is "listed" timed by the
// child in a process that has recovered once already (what memory's
// first touch costs, BenchmarkFirstTouch, taken out), and
// "listed-after-sigkill" is "listed" after a
// process that wrote fullLog transitions was killed, leaving them in the
// write-ahead log for Open to replay. The executions are made beforehand, each with a full
// default audit trail and some metadata, as a controller that has run a
// while leaves them. It reports ms (process start to done, as the parent
// saw it) and the child's own split: open-ms, list-ms (listing done),
// adopt-ms (every execution adopted; the reconciles start) and the
// executions per second, with the child's CPU time and peak resident
// memory.
//
//	EXECFSM_RECOVERY=10000 go test ./reliability -run '^$' -bench Recovery -benchtime 1x
//	EXECFSM_RECOVERY=100000 EXECFSM_RECOVERY_BOLT=1000000 go test ./reliability -run '^$' -bench Recovery -benchtime 1x -timeout 60m
//
// EXECFSM_RECOVERY_CPUPROFILE=file makes each recovering child write a
// CPU profile there (the last one run is what is left), and
// EXECFSM_RECOVERY_MEMPROFILE=file a profile of what it allocated.
func BenchmarkRecovery(b *testing.B) {
	for _, size := range recoverySizes(b) {
		backend, n := size.store, size.n
		b.Run(fmt.Sprintf("%s/%d", backend, n), func(b *testing.B) {
			spec := recoveryOver(b, backend, n)
			for _, readEach := range []bool{false, true} {
				name := "listed"
				if readEach {
					name = "read-each"
				}
				spec.ReadEach = readEach
				b.Run(name, func(b *testing.B) { benchmarkRecoveryChild(b, spec, n, nil) })
			}
			if backend == "bolt" {
				spec.ReadEach, spec.MemoryWarm = false, true
				b.Run("listed-memory-warm", func(b *testing.B) { benchmarkRecoveryChild(b, spec, n, nil) })
				spec.MemoryWarm = false
			}
			if backend == "bolt" && n >= fillLogFrom+fullLog {
				// Last: it changes the executions.
				spec.ReadEach = false
				b.Run("listed-after-sigkill", func(b *testing.B) {
					benchmarkRecoveryChild(b, spec, n, func() int64 { return fillLogAndKill(b, spec, fullLog) })
				})
			}
		})
	}
}

// fullLog is how many writes a SIGKILL leaves in bbolt's write-ahead log
// at most while its checkpoints keep up: one short of the 4,096 writes
// of a segment that start a checkpoint (boltstore's overlay.go).
const fullLog = 4095

// fillLogFrom is the first execution childFillLog writes.
const fillLogFrom = 1000

// benchmarkRecoveryChild times b.N recovering controllers over the n
// executions of spec's store, each after prepare (if any), which
// returns the bytes of write-ahead log it left to replay.
func benchmarkRecoveryChild(b *testing.B, spec childSpec, n int, prepare func() int64) {
	var total, open, list, adopt, cpu time.Duration
	var heap uint64
	var encoded int
	var rss int64
	var logged int64
	var adminPage time.Duration
	for range b.N {
		if prepare != nil {
			logged += prepare()
		}
		res, took := runRecoveryChild(b, spec)
		took -= time.Duration(res.AfterIdleNS)
		if spec.MemoryWarm {
			took = time.Duration(res.IdleNS) // the second recovery's, as the child timed it
		}
		heap += res.HeapBytes
		encoded = res.EncodedBytes
		require.Equal(b, n, res.Executions, "every execution adopted")
		require.Equal(b, int64(n), res.Reconciled, "and reconciled once")
		total += took
		cpu += res.CPU
		rss += res.PeakRSS
		open += time.Duration(res.OpenNS)
		list += time.Duration(res.ListNS)
		adopt += time.Duration(res.AdoptNS)
		adminPage += time.Duration(res.AdminFirstPageNS)
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "ms")
	b.ReportMetric(float64((open / time.Duration(b.N)).Milliseconds()), "open-ms")
	b.ReportMetric(float64((list / time.Duration(b.N)).Milliseconds()), "list-ms")
	b.ReportMetric(float64((adopt / time.Duration(b.N)).Milliseconds()), "adopt-ms")
	b.ReportMetric(float64(n)/per.Seconds(), "executions/s")
	b.ReportMetric(float64((cpu / time.Duration(b.N)).Milliseconds()), "child-cpu-ms")
	b.ReportMetric(float64(rss)/float64(b.N)/(1<<20), "child-peak-rss-MiB")
	b.ReportMetric(float64(heap)/float64(b.N)/float64(n), "heap-B/execution")
	b.ReportMetric(float64(encoded), "encoded-B/execution")
	if prepare != nil {
		b.ReportMetric(float64(logged)/float64(b.N)/(1<<20), "log-MiB")
	}
	if spec.LiveOnly {
		b.ReportMetric(float64(adminPage/time.Duration(b.N))/float64(time.Millisecond), "admin-first-page-ms")
	}
}

// makeExecutions creates n executions, 32 at a time, each running with
// a full default audit trail and the metadata recovery keeps.
func makeExecutions(b testing.TB, store storage.Store, n int) {
	b.Helper()
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	entries := make([]storage.Entry, storage.DefaultHistoryLimit)
	for k := range entries {
		from, to := "running", "paused"
		if k%2 == 1 {
			from, to = to, from
		}
		entries[k] = storage.Entry{From: from, To: to, Reason: "operator request", Actor: "controller-7f9c",
			Owner: "controller-7f9c", Epoch: 3, At: at.Add(time.Duration(k) * time.Second), Revision: uint64(k)}
	}
	trail, err := storage.NewTrail(entries...)
	require.NoError(b, err)
	createConcurrently(b, store, n, func(k int) storage.Record {
		return storage.Record{
			ID: fmt.Sprintf("ex-%06d", k), Status: "running", Previous: "paused", UpdatedAt: at, Since: at,
			Reason: "operator request", History: trail,
			Meta: map[string]string{"restarts": "1", "execfsm.io/relocatable": "true", "slicer": "persistent"},
		}
	})
}

// runRecoveryChild starts a recovering controller and returns what it
// reported and the time from starting its process until it exited.
func runRecoveryChild(b testing.TB, spec childSpec) (recoveryResult, time.Duration) {
	b.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	// The controller logs as any does (its Loop's adoption pass, at
	// Info); kept apart so that it never splits a benchmark's line, and
	// shown when it fails.
	var logged bytes.Buffer
	cmd.Stderr = &logged
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	require.NoError(b, err, "the recovering controller, which logged:\n%s", logged.String())
	var res recoveryResult
	require.NoError(b, json.Unmarshal(out, &res), "its report: %s", out)
	res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, took
}

// peakRSS is this process's peak resident memory in bytes, from Linux's
// /proc/self/status; 0 where there is none.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}

// BenchmarkFirstTouch is what this machine charges for memory a process
// touches for the first time: fresh anonymous pages, written once each,
// against the same pages written again. A restarted controller holds
// every execution's record, so on a machine (a virtual one, typically)
// whose first touch is slow its recovery is bound by the bytes it
// holds, not by the work it does; the report says how much of the
// recovery time that is.
func BenchmarkFirstTouch(b *testing.B) {
	const size = 256 << 20
	page := os.Getpagesize()
	touch := func(mem []byte) {
		for i := 0; i < len(mem); i += page {
			mem[i] = 1
		}
	}
	for _, again := range []bool{false, true} {
		name := "fresh"
		if again {
			name = "again"
		}
		b.Run(name, func(b *testing.B) {
			var took time.Duration
			for range b.N {
				mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				require.NoError(b, err)
				if again {
					touch(mem)
				}
				start := time.Now()
				touch(mem)
				took += time.Since(start)
				require.NoError(b, syscall.Munmap(mem))
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N)/float64(size>>20), "ns/MiB")
		})
	}
}

// childFillLog pauses spec.Ops executions of a bbolt store (ex-001000
// on: makeExecutions's trails end at revision 15, which the first
// records made are not yet past), 32 at a time, says "ready" on its stdout and waits to be killed:
// the writes are acknowledged, in the write-ahead log, and not yet in
// bbolt, so the next Open replays them.
func childFillLog(ctx context.Context, spec childSpec) error {
	store, _, err := childStore(spec) // never closed: the process is killed
	if err != nil {
		return err
	}
	ids := make(chan int)
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			var err error
			for k := range ids {
				if err != nil {
					continue
				}
				var p *transition.Persisted[state.Status]
				if p, err = transition.NewPersisted(teraslice.Lifecycle(), store, fmt.Sprintf("ex-%06d", fillLogFrom+k), transition.PersistedOptions{Actor: "operator"}); err == nil {
					_, err = p.Fire(ctx, state.Paused, "maintenance")
				}
			}
			errs <- err
		}()
	}
	for k := range spec.Ops {
		ids <- k
	}
	close(ids)
	for range 32 {
		if err := <-errs; err != nil {
			return err
		}
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// fillLogAndKill runs childFillLog over the store at spec.BoltPath and
// SIGKILLs it once its writes are acknowledged. It returns the bytes of
// write-ahead log left beside the file.
func fillLogAndKill(b *testing.B, spec childSpec, writes int) int64 {
	b.Helper()
	spec.Role, spec.Ops = "fill-log", writes
	cmd, out := startChild(b, spec)
	require.True(b, out.Scan(), "the writer's ready line: %v", out.Err())
	require.Equal(b, "ready", out.Text())
	require.NoError(b, cmd.Process.Signal(syscall.SIGKILL))
	require.Error(b, cmd.Wait(), "killed")
	segments, err := filepath.Glob(spec.BoltPath + ".wal-*")
	require.NoError(b, err)
	var size int64
	for _, seg := range segments {
		info, err := os.Stat(seg)
		require.NoError(b, err)
		size += info.Size()
	}
	require.NotZero(b, size, "a log left to replay")
	return size
}

// createConcurrently creates the n records record makes, 32 at a time.
func createConcurrently(b testing.TB, store storage.Store, n int, record func(k int) storage.Record) {
	b.Helper()
	ids := make(chan int)
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			var err error
			for k := range ids {
				if err == nil {
					_, err = store.Create(context.Background(), record(k))
				}
			}
			errs <- err
		}()
	}
	for k := range n {
		ids <- k
	}
	close(ids)
	for range 32 {
		require.NoError(b, <-errs)
	}
}

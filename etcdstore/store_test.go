package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// shared is one single-member etcd for the tests that do not stop it;
// each test gets its own key prefix.
var shared *embedded.Cluster

func TestMain(m *testing.M) {
	if raw := os.Getenv(upgradeChildEnv); raw != "" {
		os.Exit(upgradeChild(raw)) // a controller of the rolling upgrade test
	}
	dir, err := os.MkdirTemp("", "etcdstore-test-")
	if err != nil {
		panic(err)
	}
	shared, err = embedded.Start(dir, 1, embedded.Options{})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	shared.Close()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(ignoreEtcd()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var bg = context.Background()

var prefixes atomic.Int64

func client(t testing.TB, c *embedded.Cluster) *clientv3.Client {
	t.Helper()
	cl, err := c.Client()
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// newStore returns a store on the shared server under a fresh prefix.
func newStore(t testing.TB, opts etcdstore.Options) *etcdstore.Store {
	t.Helper()
	opts.Prefix = fmt.Sprintf("/test-%d/", prefixes.Add(1))
	s, err := etcdstore.New(client(t, shared), opts)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return newStore(t, etcdstore.Options{}) })
	storagetest.RunTable(t, func(t *testing.T) storage.Store { return newStore(t, etcdstore.Options{}) })
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := etcdstore.New(nil, etcdstore.Options{})
	require.Error(t, err)
	cl := client(t, shared)
	_, err = etcdstore.New(cl, etcdstore.Options{Prefix: "no-slash"})
	require.Error(t, err)
	_, err = etcdstore.New(cl, etcdstore.Options{Timeout: -1})
	require.Error(t, err)
}

func TestPersistedLifecycleOnEtcdUsesModRevision(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To(state.Pending))
	require.NoError(t, err)
	c, err := exec.Fire(bg, state.Scheduling, "allocator")
	require.NoError(t, err)
	resp, err := client(t, shared).Get(bg, s.Prefix()+"records/ex-1")
	require.NoError(t, err)
	require.Equal(t, uint64(resp.Kvs[0].ModRevision), c.Revision)
}

// Writes encode into buffers the store reuses: concurrent writers each
// find their own record as they wrote it, never bytes of another's.
func TestConcurrentWritesKeepTheirOwnValues(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	const writers, writes = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			id := fmt.Sprintf("ex-%d", w)
			rec := storagetest.Sample(id)
			stored, err := s.Create(bg, rec)
			if err != nil {
				errs <- err
				return
			}
			for k := range writes {
				next := stored
				// Records of different sizes: a reused buffer longer than
				// the next encoding must not leak its tail into it.
				next.Reason = fmt.Sprintf("writer %d write %d %s", w, k, strings.Repeat("x", (w*writes+k)%97))
				if stored, err = s.CompareAndSwap(bg, id, stored.Revision, next); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for w := range writers {
		got, err := s.Get(bg, fmt.Sprintf("ex-%d", w))
		require.NoError(t, err)
		k := writes - 1
		require.Equal(t, fmt.Sprintf("writer %d write %d %s", w, k, strings.Repeat("x", (w*writes+k)%97)), got.Reason)
	}
}

func TestCorruptValueIsReportedAndNeverOverwritten(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	rec, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	cl := client(t, shared)
	put, err := cl.Put(bg, s.Prefix()+"records/ex-1", "\x09future format")
	require.NoError(t, err)
	_, err = s.Get(bg, "ex-1")
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.Contains(t, err.Error(), "ex-1")
	_, err = s.CompareAndSwap(bg, "ex-1", uint64(put.Header.Revision), rec)
	require.NoError(t, err, "only a writer naming the corrupt value's own revision (a repair) replaces it")
	_, err = cl.Put(bg, s.Prefix()+"records/ex-1", "garbage")
	require.NoError(t, err)
	_, err = s.CompareAndSwap(bg, "ex-1", rec.Revision, rec)
	require.ErrorIs(t, err, storage.ErrCorrupt, "a stale writer learns the value is corrupt; nothing is written")
	_, err = s.Create(bg, storagetest.Sample("ex-2"))
	require.NoError(t, err)
	recs, bad, err := s.List(bg)
	require.NoError(t, err, "one unreadable record does not fail the list")
	require.Len(t, recs, 1)
	require.Equal(t, "ex-2", recs[0].ID)
	require.Len(t, bad, 1)
	require.Equal(t, "ex-1", bad[0].ID)
	require.ErrorIs(t, bad[0].Err, storage.ErrCorrupt)
}

// A watch from a revision etcd has compacted away re-lists every record
// and carries on; so does a watch broken by a server restart.
func TestWatchReListsAfterCompactionAndRestart(t *testing.T) {
	t.Parallel() // a cluster of its own
	c, err := embedded.Start(t.TempDir(), 1, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	cl := client(t, c)
	s, err := etcdstore.New(cl, etcdstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	var first storage.Record
	for k := range 10 {
		rec, err := s.Create(bg, storagetest.Sample(fmt.Sprintf("ex-%d", k)))
		require.NoError(t, err)
		if k == 0 {
			first = rec
		}
	}
	status, err := cl.Status(bg, c.Endpoint(0))
	require.NoError(t, err)
	_, err = cl.Compact(bg, status.Header.Revision)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch, err := s.Watch(ctx, first.Revision)
	require.NoError(t, err)
	seen := map[string]bool{}
	for len(seen) < 10 {
		seen[recv(t, ch).ID] = true
	}
	rec, err := s.Create(bg, storagetest.Sample("ex-new"))
	require.NoError(t, err)
	require.Equal(t, storage.WatchEvent{ID: "ex-new", Revision: rec.Revision}, recvID(t, ch, "ex-new"))

	// The server goes away under the watch and comes back.
	c.Stop(0)
	require.NoError(t, c.Restart(0))
	var after storage.Record
	require.Eventually(t, func() bool {
		after, err = s.Create(bg, storagetest.Sample("ex-after-restart"))
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, storage.WatchEvent{ID: "ex-after-restart", Revision: after.Revision}, recvID(t, ch, "ex-after-restart"))
}

func recv(t *testing.T, ch <-chan storage.WatchEvent) storage.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "watch closed")
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
	}
	return storage.WatchEvent{}
}

// recvID reads events (re-listed duplicates included) until one for id.
func recvID(t *testing.T, ch <-chan storage.WatchEvent, id string) storage.WatchEvent {
	t.Helper()
	for {
		if ev := recv(t, ch); ev.ID == id {
			return ev
		}
	}
}

func TestStartupOwnership(t *testing.T) {
	t.Parallel() // a prefix of its own, leases of 30 s: the clusters beside it do not hurry it
	recoverytest.RunOwnership(t, func(t *testing.T) storage.Store { return newStore(t, etcdstore.Options{}) }, recoverytest.Options{})
}

func TestLeaseExpiryLetsTheNextControllerTakeOverAndFencesTheOldOne(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	master, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.To(state.Running))
	require.NoError(t, err)

	// Controller A has its own client: its death is that client going.
	clA, err := shared.Client()
	require.NoError(t, err)
	sA, err := etcdstore.New(clA, etcdstore.Options{Prefix: s.Prefix()})
	require.NoError(t, err)
	podA, err := transition.NewPersisted(teraslice.Lifecycle(), sA, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, _, err = podA.Acquire(bg, storage.Lease{Holder: "pod-a", TTL: 2 * time.Second}, nil)
	require.NoError(t, err)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, podA.Claim())
	require.IsType(t, &etcdstore.Ownership{}, podA.Ownership())

	_, _, err = s.Acquire(bg, "ex-1", storage.Lease{Holder: "pod-b", TTL: 2 * time.Second})
	require.ErrorIs(t, err, storage.ErrHeld)
	require.Contains(t, err.Error(), "pod-a")

	require.NoError(t, clA.Close()) // pod-a dies; its lease is no longer kept alive
	select {
	case <-podA.Ownership().Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("pod-a did not learn it lost the execution")
	}

	// pod-b waits for the lease to expire instead of polling.
	waitCtx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	start := time.Now()
	podB, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, rec, err := podB.Acquire(waitCtx, storage.Lease{Holder: "pod-b", TTL: 2 * time.Second, Wait: true}, nil)
	require.NoError(t, err, "after the lease expires the next controller takes over")
	t.Logf("took over %v after pod-a died", time.Since(start).Round(time.Millisecond))
	defer func() { require.NoError(t, podB.Ownership().Release(bg)) }()
	require.Equal(t, storage.Claim{Owner: "pod-b", Epoch: 2}, podB.Claim())
	require.Equal(t, uint64(2), rec.Epoch)

	// pod-a comes back from a long pause: fenced.
	_, err = podA.Fire(bg, state.Failed, "old pod")
	require.ErrorIs(t, err, storage.ErrFenced)
	_, err = podB.Fire(bg, state.Paused, "new pod")
	require.NoError(t, err)
}

// A lease revoked behind the holder's back (an operator's etcdctl lease
// revoke) closes Lost: the holder learns it no longer owns the execution.
func TestRevokedLeaseClosesLost(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	_, err := s.Create(bg, storage.Record{ID: "ex-1", Status: "running"})
	require.NoError(t, err)
	// The revocation is learnt at the next keep-alive, a third of the TTL
	// on: a short TTL keeps the test short (30 s made it wait 10).
	own, _, err := s.Acquire(bg, "ex-1", storage.Lease{Holder: "pod-a", TTL: 3 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, own.Release(bg)) }()
	_, err = client(t, shared).Revoke(bg, own.(*etcdstore.Ownership).Lease())
	require.NoError(t, err)
	select {
	case <-own.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("Lost was not closed after the lease was revoked")
	}
	next, _, err := s.Acquire(bg, "ex-1", storage.Lease{Holder: "pod-b", TTL: 30 * time.Second})
	require.NoError(t, err)
	require.NoError(t, next.Release(bg))
}

// A 3-member cluster loses its leader mid-run: transitions go on after
// the re-election and no acknowledged write is lost.
func TestClusterKeepsEveryAcknowledgedWriteWhenTheLeaderStops(t *testing.T) {
	t.Parallel() // a cluster of its own
	c, err := embedded.Start(t.TempDir(), 3, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	cl := client(t, c)
	s, err := etcdstore.New(cl, etcdstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	const writers = 4
	for w := range writers {
		_, err := s.Create(bg, storage.Record{ID: fmt.Sprintf("ex-%d", w), Status: "running", Meta: map[string]string{"n": "0"}})
		require.NoError(t, err)
	}
	var acked, failed [writers]atomic.Int64
	stopWriting := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, fmt.Sprintf("ex-%d", w), transition.PersistedOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			for k := 0; ; k++ {
				select {
				case <-stopWriting:
					return
				default:
				}
				to := []state.Status{state.Paused, state.Running}[k%2]
				_, _, err := exec.Apply(bg, func(cur state.Status, rec storage.Record) (transition.Update[state.Status], error) {
					n, _ := strconv.Atoi(rec.Meta["n"])
					return transition.To(to).Because("toggle").Set("n", strconv.Itoa(n+1)), nil
				})
				if err != nil {
					failed[w].Add(1) // may or may not have landed: etcd could not say in time
					time.Sleep(50 * time.Millisecond)
					continue
				}
				acked[w].Add(1)
			}
		}()
	}
	waitAcks := func(n int64) {
		require.Eventually(t, func() bool {
			for w := range writers {
				if acked[w].Load() < n {
					return false
				}
			}
			return true
		}, 60*time.Second, 10*time.Millisecond)
	}
	waitAcks(20)
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	c.Stop(leader)
	before := [writers]int64{}
	for w := range writers {
		before[w] = acked[w].Load()
	}
	waitAcks(before[0] + 40) // progress after the re-election, for every writer
	newLeader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, leader, newLeader)
	close(stopWriting)
	wg.Wait()

	for w := range writers {
		rec, err := s.Get(bg, fmt.Sprintf("ex-%d", w))
		require.NoError(t, err)
		n, err := strconv.Atoi(rec.Meta["n"])
		require.NoError(t, err)
		require.GreaterOrEqual(t, int64(n), acked[w].Load(), "writer %d: every acknowledged write is there", w)
		require.LessOrEqual(t, int64(n), acked[w].Load()+failed[w].Load(), "writer %d: nothing applied twice", w)
	}
	require.NoError(t, c.Restart(leader), "the stopped member rejoins")
}

func TestUnreachableClusterGivesAnErrorWithinTheDeadline(t *testing.T) {
	c, err := embedded.Start(t.TempDir(), 1, embedded.Options{})
	require.NoError(t, err)
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cl.Close()
	s, err := etcdstore.New(cl, etcdstore.Options{Timeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	_, err = s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	c.Close()

	ctx, cancel := context.WithTimeout(bg, time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Get(ctx, "ex-1")
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)

	start = time.Now()
	_, err = s.CompareAndSwap(bg, "ex-1", 1, storagetest.Sample("ex-1")) // no deadline: the store's Timeout applies
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 5*time.Second, "%v", err)
	require.Less(t, time.Since(start), 5*time.Second)
}

// The revisions a watch needs are compacted while it is disconnected: its
// member is down, the others take writes and compact. When it reconnects
// etcd says "compacted"; the watch re-lists and the writes made meanwhile
// are all delivered.
func TestWatchSurvivesCompactionWhileItsMemberIsDown(t *testing.T) {
	t.Parallel() // a cluster of its own
	c, err := embedded.Start(t.TempDir(), 3, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	watchClient, err := embedded.NewClient([]string{c.Endpoint(0)})
	require.NoError(t, err)
	defer watchClient.Close()
	writeClient, err := embedded.NewClient([]string{c.Endpoint(1), c.Endpoint(2)})
	require.NoError(t, err)
	defer writeClient.Close()
	watching, err := etcdstore.New(watchClient, etcdstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	writing, err := etcdstore.New(writeClient, etcdstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)

	first, err := writing.Create(bg, storagetest.Sample("ex-before"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch, err := watching.Watch(ctx, first.Revision-1)
	require.NoError(t, err)
	require.Equal(t, "ex-before", recv(t, ch).ID)

	c.Stop(0)
	var last storage.Record
	require.Eventually(t, func() bool {
		last, err = writing.Create(bg, storagetest.Sample("ex-during-0"))
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	for k := 1; k < 5; k++ {
		last, err = writing.Create(bg, storagetest.Sample(fmt.Sprintf("ex-during-%d", k)))
		require.NoError(t, err)
	}
	_, err = writeClient.Compact(bg, int64(last.Revision))
	require.NoError(t, err)
	require.NoError(t, c.Restart(0))

	seen := map[string]bool{}
	for len(seen) < 5 {
		if ev := recv(t, ch); strings.HasPrefix(ev.ID, "ex-during-") {
			seen[ev.ID] = true
		}
	}
}

// ignoreEtcd ignores the goroutines an embedded etcd leaves idling.
func ignoreEtcd() []goleak.Option {
	var opts []goleak.Option
	for _, fn := range embedded.LingeringGoroutines {
		opts = append(opts, goleak.IgnoreAnyFunction(fn))
	}
	return opts
}

// The reproduction: a store with prefix /teraslice/records/tenant-b/
// writes ex-9; a store with prefix /teraslice/ then listed its key as a
// record of its own (and failed on it). Two stores with different
// prefixes share nothing, however the prefixes nest.
func TestNestedPrefixesShareNothing(t *testing.T) {
	base := fmt.Sprintf("/nest-%d/", prefixes.Add(1))
	outer, err := etcdstore.New(client(t, shared), etcdstore.Options{Prefix: base})
	require.NoError(t, err)
	inner, err := etcdstore.New(client(t, shared), etcdstore.Options{Prefix: base + "records/tenant-b/"})
	require.NoError(t, err)
	watchCtx, cancel := context.WithCancel(bg)
	defer cancel()
	events, err := outer.Watch(watchCtx, 0)
	require.NoError(t, err)

	_, err = inner.Create(bg, storagetest.Sample("ex-9"))
	require.NoError(t, err)
	own, _, err := inner.Acquire(bg, "ex-9", storagetest.Lease("pod-b"))
	require.NoError(t, err)
	defer func() { require.NoError(t, own.Release(bg)) }()
	// An outer id that looks like the inner store's key.
	_, err = outer.Create(bg, storagetest.Sample("tenant-b/records/ex-9"))
	require.NoError(t, err)

	recs, bad, err := outer.List(bg)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, recs, 1)
	require.Equal(t, "tenant-b/records/ex-9", recs[0].ID, "an id with slashes is the outer store's own, and comes back as it went in")
	ev := recv(t, events)
	require.Equal(t, "tenant-b/records/ex-9", ev.ID, "the inner store's writes are no events of the outer one")
	innerRecs, innerBad, err := inner.List(bg)
	require.NoError(t, err)
	require.Empty(t, innerBad)
	require.Len(t, innerRecs, 1)
	require.Equal(t, "ex-9", innerRecs[0].ID)
	_, err = outer.Get(bg, "ex-9")
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// A watch ends when its client is closed, instead of re-listing on a
// closed client until its context ends.
func TestWatchEndsWhenItsClientCloses(t *testing.T) {
	cl, err := shared.Client()
	require.NoError(t, err)
	s, err := etcdstore.New(cl, etcdstore.Options{Prefix: fmt.Sprintf("/close-%d/", prefixes.Add(1))})
	require.NoError(t, err)
	ch, err := s.Watch(bg, 0)
	require.NoError(t, err)
	require.NoError(t, cl.Close())
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the watch was still open after its client closed")
		}
	}
}

// A consumer that stops reading while writes pour in is not buffered
// every write: past the backlog it gets a re-list when it reads again.
// The reproduction grew the heap by ~3 KB a write, held in the etcd
// client's watch stream.
func TestAStalledWatchConsumerGetsAReListNotEveryWrite(t *testing.T) {
	s := newStore(t, etcdstore.Options{WatchBacklog: 16})
	recs := map[string]storage.Record{}
	for k := range 5 {
		rec, err := s.Create(bg, storage.Record{ID: fmt.Sprint("ex-", k), Status: "running"})
		require.NoError(t, err)
		recs[rec.ID] = rec
	}
	watchCtx, cancel := context.WithCancel(bg)
	defer cancel()
	var from uint64
	for _, r := range recs {
		from = max(from, r.Revision)
	}
	events, err := s.Watch(watchCtx, from)
	require.NoError(t, err)
	const writes = 400
	for k := range writes { // nobody reads meanwhile
		id := fmt.Sprint("ex-", k%5)
		next := recs[id]
		next.Reason = fmt.Sprint("write ", k)
		written, err := s.CompareAndSwap(bg, id, next.Revision, next)
		require.NoError(t, err)
		recs[id] = written
	}
	marker, err := s.Create(bg, storage.Record{ID: "ex-marker", Status: "running"})
	require.NoError(t, err)
	received := 0
	for {
		ev := recv(t, events)
		received++
		if ev.ID == "ex-marker" {
			require.Equal(t, marker.Revision, ev.Revision)
			break
		}
	}
	require.Less(t, received, 16+5+2+1, "%d events for %d writes: the stalled consumer was buffered every write", received, writes)
}

// A zero Store says to use New instead of panicking on its nil client.
func TestZeroStoreFailsWithAnError(t *testing.T) {
	storagetest.Unusable(t, &etcdstore.Store{}, "New")
}

// List reads a store of more records than one page of the range it
// asks etcd for, every record once, in key order, and reports a record
// that does not decode apart wherever it falls.
func TestListPagesThroughManyRecords(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	cl := client(t, shared)
	n := 2*etcdstore.ListPage + 345    // three pages, the last one short
	broken := etcdstore.ListPage + 100 // in the middle page
	ids := make([]string, n)
	for k := range ids {
		ids[k] = fmt.Sprintf("ex-%05d", k)
	}
	storagetest.CreateSamples(t, s, ids...)
	_, err := cl.Put(bg, s.Prefix()+fmt.Sprintf("records/ex-%05d", broken), "\x01{not a record")
	require.NoError(t, err)

	recs, bad, err := s.List(bg)
	require.NoError(t, err)
	require.Len(t, recs, n-1)
	require.Len(t, bad, 1)
	require.Equal(t, fmt.Sprintf("ex-%05d", broken), bad[0].ID)
	for k, rec := range recs {
		want := k
		if k >= broken {
			want++
		}
		require.Equal(t, fmt.Sprintf("ex-%05d", want), rec.ID)
	}
}

func TestTableCompatibility(t *testing.T) {
	schematest.Run(t, func(t *testing.T) storage.Store { return newStore(t, etcdstore.Options{}) })
}

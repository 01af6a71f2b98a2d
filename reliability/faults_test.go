package reliability_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// An owner is stopped (SIGSTOP) past its lease's TTL; another controller
// takes over; when the old one resumes (SIGCONT) its very next write is
// fenced, never applied.
func TestLeaseOwnerStoppedPastItsTTLIsFencedWhenItResumes(t *testing.T) {
	store, prefix := etcdStore(t)
	execs := []string{"ex-paused-owner"}
	createAll(t, store, execs)
	cmd, out := startChild(t, childSpec{Role: "lease-holder", Etcd: shared.Endpoints(), Prefix: prefix, IDs: execs, Owner: "pod-a", TTL: "2s"})
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		for out.Scan() {
			lines <- out.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the lease holder exited early")
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("the lease holder went quiet")
		}
		return ""
	}
	require.Equal(t, "acquired 1", next())
	for range 3 {
		require.True(t, strings.HasPrefix(next(), "write ok "))
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	// pod-b waits for the stopped owner's lease to expire, then takes over.
	waitCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, took, err := store.Acquire(waitCtx, execs[0], storage.Lease{Holder: "pod-b", TTL: 2 * time.Second, Wait: true})
	require.NoError(t, err, "the stopped owner's lease expires and pod-b takes over")
	defer func() { require.NoError(t, b.Release(context.Background())) }()
	require.Equal(t, uint64(2), b.Claim().Epoch)

	// What the old owner printed before it stopped may be read only now:
	// every write it says landed must have landed before the take-over.
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	for {
		l := next()
		if l == "lost" {
			continue
		}
		if rev, ok := strings.CutPrefix(l, "write ok "); ok {
			n, err := strconv.ParseUint(rev, 10, 64)
			require.NoError(t, err)
			require.Less(t, n, took.Revision, "a write of the old owner landed after pod-b took over")
			continue
		}
		require.Equal(t, "write fenced", l, "the resumed owner's first write is fenced")
		break
	}
	after, err := store.Get(context.Background(), execs[0])
	require.NoError(t, err)
	require.Equal(t, took.Revision, after.Revision, "nothing the old owner tried after the take-over was written")
	require.Equal(t, "pod-b", after.Owner)
}

// etcdClients runs clients that fire random moves through their own
// store handle (all endpoints, short timeouts) until stop closes, pausing
// after an error as a real client would back off.
func etcdClients(t *testing.T, c *embedded.Cluster, prefix string, execs []string, clients int, stop <-chan struct{}, progress *atomic.Int64) *history.Recorder {
	var rec history.Recorder
	var wg sync.WaitGroup
	for cl := range clients {
		client, err := c.Client()
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		s, err := etcdstore.New(client, etcdstore.Options{Prefix: prefix, Timeout: 2 * time.Second})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := uint64(0); ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				var failed bool
				_ = fireOps(context.Background(), s, cl, execs, 1, k, func(op history.Op) {
					rec.Add(op)
					failed = op.Outcome == history.Unknown
					if op.Outcome == history.Changed {
						progress.Add(1)
					}
				})
				if failed {
					time.Sleep(300 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(wg.Wait)
	return &rec
}

// A member of a 3-member cluster, then the whole cluster, is stopped and
// restarted while controllers transition. The history, unanswered writes
// included, stays linearizable, and work goes on after each restart.
func TestMemberAndWholeClusterRestartsKeepHistoriesLinearizable(t *testing.T) {
	c, err := embedded.Start(t.TempDir(), 3, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	setup, err := c.Client()
	require.NoError(t, err)
	defer setup.Close()
	s, err := etcdstore.New(setup, etcdstore.Options{Prefix: "/faults/", Timeout: 5 * time.Second})
	require.NoError(t, err)
	execs := ids("fault", 2)
	createAll(t, s, execs)

	stop := make(chan struct{})
	var progress atomic.Int64
	rec := etcdClients(t, c, "/faults/", execs, 4, stop, &progress)
	advance := func(what string) {
		t.Helper()
		from := progress.Load()
		require.Eventually(t, func() bool { return progress.Load() >= from+20 }, 60*time.Second, 10*time.Millisecond, "no progress %s", what)
	}
	advance("at first")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	c.Stop(leader)
	advance("with the leader stopped")
	require.NoError(t, c.Restart(leader))
	advance("after the member rejoined")
	for i := range c.Size() {
		c.Stop(i)
	}
	time.Sleep(500 * time.Millisecond) // calls fail meanwhile
	errs := make([]error, c.Size())
	var wg sync.WaitGroup
	for i := range c.Size() {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Restart(i) }()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	advance("after the whole cluster restarted")
	close(stop)
	ops := rec.Ops()
	unknown := 0
	for _, op := range ops {
		if op.Outcome == history.Unknown {
			unknown++
		}
	}
	t.Logf("%d operations, %d unanswered", len(ops), unknown)
	require.NoError(t, history.Check(history.FireModel(teraslice.Lifecycle()), ops, artifacts(), "fire-etcd-faults", checkTimeout))
}

// The recovery loop is fed by an etcd watch whose member goes down while
// the others take writes and compact past the watch's revision. The watch
// re-lists, the loop reconciles, and its view ends equal to the store:
// nothing written while it was cut off is missed.
func TestWatchCompactedUnderTheLoopMissesNothing(t *testing.T) {
	c, err := embedded.Start(t.TempDir(), 3, embedded.Options{})
	require.NoError(t, err)
	defer c.Close()
	watchClient, err := embedded.NewClient([]string{c.Endpoint(0)})
	require.NoError(t, err)
	defer watchClient.Close()
	writeClient, err := embedded.NewClient([]string{c.Endpoint(1), c.Endpoint(2)})
	require.NoError(t, err)
	defer writeClient.Close()
	watching, err := etcdstore.New(watchClient, etcdstore.Options{Prefix: "/watch/", Timeout: 5 * time.Second})
	require.NoError(t, err)
	writing, err := etcdstore.New(writeClient, etcdstore.Options{Prefix: "/watch/", Timeout: 5 * time.Second})
	require.NoError(t, err)
	execs := ids("w", 5)
	createAll(t, writing, execs)

	var mu sync.Mutex
	view := map[string]uint64{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := watching.Watch(ctx, 0)
	require.NoError(t, err)
	events := make(chan string)
	go func() {
		defer close(events)
		for ev := range watch {
			select {
			case events <- ev.ID:
			case <-ctx.Done():
				return
			}
		}
	}()
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Events: events,
		Reconciler: reconcile.ReconcilerFunc[string](func(ctx context.Context, id string) (reconcile.Result, error) {
			rec, err := watching.Get(ctx, id)
			if err != nil {
				return reconcile.Result{}, err
			}
			mu.Lock()
			view[id] = max(view[id], rec.Revision)
			mu.Unlock()
			return reconcile.Result{}, nil
		}),
		Backoff: &reconcile.Backoff{Base: 10 * time.Millisecond, Max: time.Second},
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	move := func(to state.Status) {
		for _, id := range execs {
			p, err := transition.NewPersisted(teraslice.Lifecycle(), writing, id, transition.PersistedOptions{})
			require.NoError(t, err)
			require.Eventually(t, func() bool { _, err = p.Fire(context.Background(), to, "writer"); return err == nil },
				30*time.Second, 100*time.Millisecond, "%v", err)
		}
	}
	move(state.Scheduling)
	c.Stop(0)
	move(state.Initializing)
	move(state.Running)
	status, err := writeClient.Status(context.Background(), c.Endpoint(1))
	require.NoError(t, err)
	_, err = writeClient.Compact(context.Background(), status.Header.Revision)
	require.NoError(t, err)
	require.NoError(t, c.Restart(0))

	want := map[string]uint64{}
	for _, id := range execs {
		rec, err := writing.Get(context.Background(), id)
		require.NoError(t, err)
		want[id] = rec.Revision
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, rev := range want {
			if view[id] < rev {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "the loop saw every write made while its watch was cut off")
}

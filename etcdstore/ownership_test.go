package etcdstore_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// A lease revoked in etcd behind the holder's back (an operator's
// `etcdctl lease revoke`, or the lease expiring in etcd): a write the
// holder sends before it has even noticed is not applied, because its
// transaction compares the lease. etcd's own guarantee, not the holder's
// clock.
func TestAWriteWhoseLeaseIsGoneInEtcdIsNotApplied(t *testing.T) {
	s := newStore(t, etcdstore.Options{})
	_, err := s.Create(bg, storage.Record{ID: "ex-1", Status: "running"})
	require.NoError(t, err)
	own, rec, err := s.Acquire(bg, "ex-1", storage.Lease{Holder: "pod-a", TTL: time.Minute})
	require.NoError(t, err)
	defer func() { require.NoError(t, own.Release(bg)) }()
	_, err = client(t, shared).Revoke(bg, own.(*etcdstore.Ownership).Lease())
	require.NoError(t, err)

	next := rec.Clone()
	next.Status = "completed"
	_, err = own.CompareAndSwap(bg, rec.Revision, next)
	var fenced *storage.FencedError
	require.ErrorAs(t, err, &fenced)
	require.True(t, fenced.Lost)
	got, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "nothing applied")
	select {
	case <-own.Lost():
	default:
		t.Fatal("a write that found the lease gone did not end the ownership")
	}
}

// The same through a Persisted: a Fire waits in a guard while etcd
// revokes the lease; nothing lands when the guard lets it go.
func TestAFireHeldInAGuardWhileEtcdRevokesTheLeaseLandsNothing(t *testing.T) {
	recoverytest.WriteHeldInAGuard(t, newStore(t, etcdstore.Options{}), recoverytest.Outage{
		End: func(t *testing.T, own storage.Ownership) {
			_, err := client(t, shared).Revoke(bg, own.(*etcdstore.Ownership).Lease())
			require.NoError(t, err)
		},
	})
}

// cuttable stands between one controller and etcd, as the network does:
// the test cuts it (every connection dropped, new ones refused at once)
// and mends it. etcd itself runs on, for everyone else.
type cuttable struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	done   sync.WaitGroup
}

func newCuttable(t *testing.T, target string) *cuttable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &cuttable{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	c.done.Add(1)
	go c.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		c.setCut(true)
		c.done.Wait()
	})
	return c
}

func (c *cuttable) endpoint() string { return c.ln.Addr().String() }

func (c *cuttable) serve() {
	defer c.done.Done()
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil || !c.track(in, out) {
			_ = in.Close()
			if out != nil {
				_ = out.Close()
			}
			continue
		}
		for _, pair := range [][2]net.Conn{{in, out}, {out, in}} {
			c.done.Add(1)
			go func() {
				defer c.done.Done()
				_, _ = io.Copy(pair[0], pair[1])
				_ = pair[0].Close()
				_ = pair[1].Close()
			}()
		}
	}
}

// track remembers a connection pair, or refuses it while cut.
func (c *cuttable) track(in, out net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return false
	}
	c.conns[in], c.conns[out] = struct{}{}, struct{}{}
	return true
}

func (c *cuttable) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for conn := range c.conns {
			_ = conn.Close()
		}
		clear(c.conns)
	}
}

// A controller is cut off from etcd for longer than its lease: it loses
// its ownership while alive, and etcd lets the lease expire. Once the
// network is mended and nobody has taken the execution over, it takes it
// back at a new epoch without counting a restart, outage after outage.
func TestAControllerWhoseLeaseAnOutageEndedTakesItBackCountingNothing(t *testing.T) {
	net := newCuttable(t, strings.TrimPrefix(shared.Endpoints()[0], "http://"))
	// Reconnect soon after the network is mended, as a controller tuned
	// for it would; gRPC's default backoff would only make the test long.
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{net.endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second}})}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	s, err := etcdstore.New(cl, etcdstore.Options{Prefix: newStore(t, etcdstore.Options{}).Prefix(), Timeout: 3 * time.Second})
	require.NoError(t, err)
	exec := recoverytest.TakeBackAfterOutages(t, s, recoverytest.Outage{
		TTL: 2 * time.Second,
		End: func(t *testing.T, own storage.Ownership) {
			net.setCut(true)
			defer net.setCut(false)
			select {
			case <-own.Lost(): // the client gave up keeping the lease alive
			case <-time.After(30 * time.Second):
				t.Fatal("the controller never learned it lost its lease")
			}
		},
	})
	require.NoError(t, exec.Ownership().Release(bg))
}

// A manager's executions are held under its one lease: when etcd
// revokes it, every execution's ownership ends with it, and the next
// manager takes each over at once.
func TestAManagersExecutionsEndWithItsRevokedLease(t *testing.T) {
	recoverytest.ManagerLosesItsLease(t, newStore(t, etcdstore.Options{}), recoverytest.Outage{
		End: func(t *testing.T, own storage.Ownership) {
			_, err := client(t, shared).Revoke(bg, own.(*etcdstore.Ownership).Lease())
			require.NoError(t, err)
		},
	})
}

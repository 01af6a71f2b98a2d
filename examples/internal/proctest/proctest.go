// Package proctest is the examples' test harness: it runs a test binary
// as the example's own child processes, and checks what an interrupted
// example leaves behind.
package proctest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Gone reports whether process pid no longer runs: it does not exist, or
// it is a zombie (dead, waiting for a parent that may never reap it, as
// under a container's init that does not reap orphans).
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state is the field after the parenthesised command name.
	if k := bytes.LastIndexByte(stat, ')'); k >= 0 && k+2 < len(stat) {
		return stat[k+2] == 'Z' || stat[k+2] == 'X'
	}
	return false
}

// Main runs an example's tests, or, when the test binary was started as
// one of the example's child processes, that child: the examples' test
// binaries play their own children. It checks for leaked goroutines,
// ignoring the ones an embedded etcd leaves idling.
func Main(m *testing.M, child func(proc.Spec) int) {
	if spec, isChild, err := proc.ChildSpec(); isChild {
		if err != nil {
			panic(err)
		}
		os.Exit(child(spec))
	}
	var opts []goleak.Option
	for _, fn := range embedded.LingeringGoroutines {
		opts = append(opts, goleak.IgnoreAnyFunction(fn))
	}
	goleak.VerifyTestMain(m, opts...)
}

// Supervisor is an example's supervisor run as a child process, with
// what it said about itself.
type Supervisor struct {
	*proc.Child
	Dir      string // its working directory
	Endpoint string // host:port of the etcd it started
}

// StartSupervisor starts the example's supervisor with args (which must
// choose -store etcd) and waits until it has said where it works.
func StartSupervisor(t *testing.T, g *proc.Group, args []string) *Supervisor {
	t.Helper()
	sup, err := g.Start("supervisor", "supervisor", args)
	require.NoError(t, err)
	ctx := context.Background()
	dir, err := sup.Await(ctx, "workdir", nil, time.Minute)
	require.NoError(t, err)
	store, err := sup.Await(ctx, "store", map[string]string{"kind": "etcd"}, time.Minute)
	require.NoError(t, err)
	endpoint, err := url.Parse(store.Attrs["endpoint"])
	require.NoError(t, err)
	s := &Supervisor{Child: sup, Dir: dir.Attrs["path"], Endpoint: endpoint.Host}
	_, err = os.Stat(s.Dir)
	require.NoError(t, err, "the working directory exists while running")
	return s
}

// InterruptLeavesNothing sends the supervisor SIGINT and checks that it
// exits 130 having removed its directory, stopped its etcd and left none
// of pids running.
func (s *Supervisor) InterruptLeavesNothing(t *testing.T, pids []int) {
	t.Helper()
	require.NoError(t, s.Signal(syscall.SIGINT))
	exit, err := s.Wait(context.Background(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, 130, exit.Code)
	_, err = os.Stat(s.Dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "working directory removed: %v", err)
	for _, pid := range pids {
		require.Eventually(t, func() bool { return Gone(pid) }, 10*time.Second, 10*time.Millisecond, "process %d left running", pid)
	}
	conn, err := net.DialTimeout("tcp", s.Endpoint, time.Second)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "etcd no longer listens")
}

package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/proctest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The test binary is also the managers and simulators.
func TestMain(m *testing.M) {
	if spec, isChild, err := proc.ChildSpec(); isChild {
		if err != nil {
			panic(err)
		}
		os.Exit(child(spec))
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

var startedPID = regexp.MustCompile(`started \S+ \S+ pid (\d+)`)

func simulatorPIDs(out string) []int {
	var pids []int
	for _, m := range startedPID.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

func TestManagerCrashRecoveryPassesOnEveryStore(t *testing.T) {
	for _, kind := range []string{"etcd", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			var out strings.Builder
			code := supervise([]string{"-store", kind}, &out)
			t.Log(out.String())
			require.Equal(t, 0, code)
			require.NotContains(t, out.String(), "FAIL")
			require.Contains(t, out.String(), "recovery listed 2 adopted 2 gone 1")
			pids := simulatorPIDs(out.String())
			require.Len(t, pids, 3)
			for _, pid := range pids {
				require.Eventually(t, func() bool { return proctest.Gone(pid) }, 10*time.Second, 10*time.Millisecond, "simulator %d left running", pid)
			}
		})
	}
}

func TestMemoryStoreIsRefused(t *testing.T) {
	var out strings.Builder
	require.Equal(t, 1, supervise([]string{"-store", "memory"}, &out))
}

// Ctrl-C with simulators running and their manager alive: nothing is
// left, not the simulators the manager started, not etcd, not a file.
func TestInterruptLeavesNoProcessSocketOrFileBehind(t *testing.T) {
	var g proc.Group
	sup, err := g.Start("supervisor", "supervisor", []string{"-store", "etcd"})
	require.NoError(t, err)
	defer g.KillAll()
	ctx := context.Background()
	dirLine, err := sup.WaitFor(ctx, "working directory: ", waitLong)
	require.NoError(t, err)
	dir := strings.TrimPrefix(dirLine, "working directory: ")
	storeLine, err := sup.WaitFor(ctx, "store: etcd ", waitLong)
	require.NoError(t, err)
	endpoint, err := url.Parse(strings.TrimPrefix(storeLine, "store: etcd "))
	require.NoError(t, err)
	_, err = sup.WaitFor(ctx, "  view before the crash:", waitLong)
	require.NoError(t, err)
	pids := simulatorPIDs(strings.Join(sup.Lines(), "\n"))
	require.Len(t, pids, 3)

	require.NoError(t, sup.Signal(syscall.SIGINT))
	exit, err := sup.Wait(ctx, waitLong)
	require.NoError(t, err)
	require.Equal(t, 130, exit.Code)
	_, err = os.Stat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "working directory removed: %v", err)
	for _, pid := range pids {
		require.Eventually(t, func() bool { return proctest.Gone(pid) }, 10*time.Second, 10*time.Millisecond, "simulator %d left running", pid)
	}
	conn, err := net.DialTimeout("tcp", endpoint.Host, time.Second)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "etcd no longer listens")
}

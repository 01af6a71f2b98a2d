package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
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

// The test binary is also the controllers the supervisor starts.
func TestMain(m *testing.M) {
	if spec, isChild, err := proc.ChildSpec(); isChild {
		if err != nil {
			panic(err)
		}
		os.Exit(child(spec))
	}
	goleak.VerifyTestMain(m,
		// The embedded etcd's peer HTTP connections idle out on their own.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

func TestEveryScenarioPassesOnEtcd(t *testing.T) {
	var out strings.Builder
	code := supervise([]string{"-store", "etcd"}, &out)
	t.Log(out.String())
	require.Equal(t, 0, code)
	for _, name := range scenarioNames() {
		require.Contains(t, out.String(), "PASS "+name)
	}
	require.Contains(t, out.String(), "late write fenced", "the overlap's old controller was fenced")
	require.Contains(t, out.String(), "restart budget spent")
}

func TestBoltRunsOnlyTheScenariosWithoutOverlapAndSaysSo(t *testing.T) {
	var out strings.Builder
	code := supervise([]string{"-store", "bolt"}, &out)
	t.Log(out.String())
	require.Equal(t, 0, code)
	require.Contains(t, out.String(), "PASS drain")
	require.Contains(t, out.String(), "PASS oom")
	for _, name := range []string{"stop", "race", "overlap"} {
		require.Contains(t, out.String(), "  "+name+strings.Repeat(" ", 8-len(name))+" SKIP")
	}
	require.Contains(t, out.String(), "bbolt locks its file to one process")
}

func TestBadFlagsAreRefused(t *testing.T) {
	var out strings.Builder
	require.Equal(t, 1, supervise([]string{"-store", "memory"}, &out))
	require.Equal(t, 1, supervise([]string{"-scenarios", "nope"}, &out))
	require.Equal(t, 2, supervise([]string{"-bogus"}, &out))
}

// Ctrl-C in the middle of a run: the supervisor stops every controller,
// shuts etcd down and removes its directory. Nothing is left behind.
func TestInterruptLeavesNoProcessSocketOrFileBehind(t *testing.T) {
	var g proc.Group
	sup, err := g.Start("supervisor", "supervisor", []string{"-store", "etcd", "-scenarios", "drain"})
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
	podLine, err := sup.WaitFor(ctx, "  pod-1 started (pid ", waitLong)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(podLine, "  pod-1 started (pid "), ")"))
	require.NoError(t, err)
	_, err = os.Stat(dir)
	require.NoError(t, err, "the working directory exists while running")

	require.NoError(t, sup.Signal(syscall.SIGINT))
	exit, err := sup.Wait(ctx, waitLong)
	require.NoError(t, err)
	require.Equal(t, 130, exit.Code)

	_, err = os.Stat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist), "working directory removed: %v", err)
	require.Eventually(t, func() bool { return proctest.Gone(pid) }, 10*time.Second, 10*time.Millisecond,
		"the controller process is gone")
	conn, err := net.DialTimeout("tcp", endpoint.Host, time.Second)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "etcd no longer listens")
}

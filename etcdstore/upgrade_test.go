package etcdstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// upgradeChildEnv, when set, makes the test binary a controller of the
// rolling upgrade test (see upgradeChild).
const upgradeChildEnv = "EXECFSM_UPGRADE_CHILD"

// upgradeSpec is what a controller process is told.
type upgradeSpec struct {
	Endpoint, Prefix, ID, Pod string
	Version                   int // 1: Teraslice's table before relocating; 2: with it
}

// tables returns Teraslice's roles with relocating (version 2) or
// without it (version 1, the table Teraslice had before adding it),
// both over the states' names, as a controller of each version has them.
func tables(version int) (*recovery.Roles[string], error) {
	table, roles := teraslice.Lifecycle().Describe(), teraslice.Roles().Describe()
	if version == 1 {
		without := func(edges []transition.Edge) []transition.Edge {
			return slices.DeleteFunc(slices.Clone(edges), func(e transition.Edge) bool { return e.From == "relocating" || e.To == "relocating" })
		}
		table.States = slices.DeleteFunc(slices.Clone(table.States), func(s string) bool { return s == "relocating" })
		table.Edges, table.Returns, table.Guarded = without(table.Edges), without(table.Returns), without(table.Guarded)
		roles.Relocating = nil
		roles.Timers = slices.DeleteFunc(slices.Clone(roles.Timers), func(d recovery.TimerDescription) bool { return d.State == "relocating" })
	}
	t, err := transition.Rebuild(table)
	if err != nil {
		return nil, err
	}
	return recovery.RebuildRoles(t, roles)
}

// upgradeChild is one controller process: it records its table, starts
// the execution, says what it decided, and on SIGTERM does what the
// decision says.
func upgradeChild(raw string) int {
	var spec upgradeSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Println("error", err)
		return 2
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	ctx := context.Background()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{spec.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer client.Close()
	store, err := etcdstore.New(client, etcdstore.Options{Prefix: spec.Prefix})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	roles, err := tables(spec.Version)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	recorded, err := schema.Save(ctx, store, "teraslice", roles)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("table", recorded.Version)
	exec, err := transition.NewPersisted(roles.Table(), store, spec.ID, transition.PersistedOptions{Actor: spec.Pod})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	decider, err := recovery.NewDecider(roles, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	v, err := decider.Start(ctx, exec, storage.Lease{Holder: spec.Pod, TTL: 5 * time.Second, Wait: true})
	if errors.Is(err, recovery.ErrForeignStatus) {
		fmt.Println("left alone")
		return 0 // a newer controller's execution: nothing to do here
	}
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	if _, err := exec.Walk(ctx, "running", "workers connected"); err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("verdict", v.Decision, v.To, "epoch", exec.Claim().Epoch)
	<-terms
	a, err := decider.Terminate(ctx, exec, nil)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("terminate", a.Kind)
	return a.ExitCode
}

// upgradePod starts a controller process of the given table version.
func upgradePod(t *testing.T, spec upgradeSpec) (*exec.Cmd, <-chan string) {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), upgradeChildEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// said waits for the controller to print want.
func said(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the controller exited before saying %q", want)
			require.NotContains(t, l, "error")
			if l == want {
				return
			}
		case <-time.After(time.Minute):
			t.Fatalf("no %q within a minute", want)
		}
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the controller did not exit within a minute")
	}
	return cmd.ProcessState.ExitCode()
}

// A rolling upgrade, Teraslice's own: version 1 of its table has no
// relocating, version 2 adds it. The cluster ran version 1; a version 2
// controller records its table (the next version) and relocates the
// execution on SIGTERM; a version 1 controller started on it leaves it
// alone (no take-over, no write, no restart counted); a version 2
// controller resumes it. Real processes, one etcd.
func TestARollingUpgradeNeverHasAnOldControllerTouchANewerRecord(t *testing.T) {
	prefix := "/upgrade/"
	store, err := etcdstore.New(client(t, shared), etcdstore.Options{Prefix: prefix})
	require.NoError(t, err)
	v1, err := tables(1)
	require.NoError(t, err)
	recorded, err := schema.Save(bg, store, "teraslice", v1)
	require.NoError(t, err)
	require.Equal(t, 1, recorded.Version)
	for _, id := range []string{"ex-1", "ex-2"} {
		master, err := transition.NewPersisted(v1.Table(), store, id, transition.PersistedOptions{Actor: "cluster-master"})
		require.NoError(t, err)
		_, err = master.Create(bg, transition.To("pending").Because("submitted").Set(recovery.MetaRelocatable, "true"))
		require.NoError(t, err)
	}
	spec := func(pod string, version int) upgradeSpec {
		return upgradeSpec{Endpoint: shared.Endpoint(0), Prefix: prefix, ID: "ex-1", Pod: pod, Version: version}
	}
	// A version 1 controller runs another execution the whole time: the
	// two versions live side by side on one store.
	oldSpec := spec("pod-z-v1", 1)
	oldSpec.ID = "ex-2"
	old, oldOut := upgradePod(t, oldSpec)
	said(t, oldOut, "table 1")
	said(t, oldOut, "verdict start pending epoch 1")

	a, out := upgradePod(t, spec("pod-a-v2", 2))
	said(t, out, "table 2")
	said(t, out, "verdict start pending epoch 1")
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	said(t, out, "terminate relocate")
	require.Equal(t, 143, exitCode(t, a))
	relocated, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "relocating", relocated.Status)

	b, out := upgradePod(t, spec("pod-b-v1", 1))
	said(t, out, "table 2")
	said(t, out, "left alone")
	require.Equal(t, 0, exitCode(t, b))
	after, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, relocated, after, "the old controller wrote nothing")
	_, held, err := store.Held(bg, "ex-1")
	require.NoError(t, err)
	require.False(t, held, "and took nothing")

	c, out := upgradePod(t, spec("pod-c-v2", 2))
	said(t, out, "table 2")
	said(t, out, "verdict resume running epoch 2")
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	said(t, out, "terminate relocate")
	require.Equal(t, 143, exitCode(t, c))

	require.NoError(t, old.Process.Signal(syscall.SIGTERM))
	said(t, oldOut, "terminate shutdown") // version 1 has no relocating: a SIGTERM shuts down
	require.Equal(t, 0, exitCode(t, old))
	other, err := store.Get(bg, "ex-2")
	require.NoError(t, err)
	require.Equal(t, "running", other.Status, "the old version ran its own execution throughout")

	final, err := store.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Empty(t, final.Meta[recovery.MetaFailovers], "no restart was ever counted")
	var timeline []string
	for _, e := range final.History.Entries() {
		line := fmt.Sprintf("%-14s %s@%d  %s → %s", e.Actor, e.Owner, e.Epoch, e.From, e.To)
		timeline = append(timeline, line)
		t.Log(line)
		require.NotEqual(t, "pod-b-v1", e.Actor, "the version 1 controller is in no entry")
	}
	require.Contains(t, timeline, "pod-a-v2       pod-a-v2@1  running → relocating")
	require.Contains(t, timeline, "pod-c-v2       pod-c-v2@2  relocating → running")
}

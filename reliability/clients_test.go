package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/reliability/workload"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary run as one of the roles below.
const childEnv = "EXECFSM_RELIABILITY_CHILD"

// childSpec is what a child process is told.
type childSpec struct {
	Role     string   `json:"role"`
	Etcd     []string `json:"etcd,omitempty"`
	Prefix   string   `json:"prefix,omitempty"`
	BoltPath string   `json:"bolt_path,omitempty"`
	IDs      []string `json:"ids,omitempty"`
	Client   int      `json:"client"`
	Ops      int      `json:"ops"`
	Seed     uint64   `json:"seed"`
	Owner    string   `json:"owner,omitempty"`
	TTL      string   `json:"ttl,omitempty"`
	ReadEach bool     `json:"read_each,omitempty"` // recover: no record handed over
	// MemoryWarm: recover twice, report the second.
	MemoryWarm bool `json:"memory_warm,omitempty"`
	// LiveOnly: the adoption pass lists the live statuses only, a page
	// at a time (storage.PageLister), as run.Manage and
	// reconcile.StoreKeys do; then the admin handler's first page is
	// timed too.
	LiveOnly bool `json:"live_only,omitempty"`
	// VerifyInBackground opens a bbolt file with that option.
	VerifyInBackground bool `json:"verify_in_background,omitempty"`
	// Kube, when set, is the kube store the child uses.
	Kube *kubeSpec `json:"kube,omitempty"`
}

func artifacts() string {
	if d := os.Getenv("EXECFSM_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "artifacts")
}

var (
	fireOps = workload.Fire
	casOps  = workload.CAS
	ids     = workload.IDs
)

// runChild is the body of a child process.
func runChild(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	var err error
	switch spec.Role {
	case "fire-etcd":
		err = childFireEtcd(ctx, spec)
	case "lease-holder":
		err = childLeaseHolder(ctx, spec)
	case "crash-writer":
		err = childCrashWriter(ctx, spec)
	case "recover":
		err = childRecover(ctx, spec)
	case "fill-log":
		err = childFillLog(ctx, spec)
	default:
		err = fmt.Errorf("unknown role %q", spec.Role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func childFireEtcd(ctx context.Context, spec childSpec) error {
	s, closeStore, err := childStore(spec)
	if err != nil {
		return err
	}
	defer closeStore()
	enc := json.NewEncoder(os.Stdout)
	return fireOps(ctx, s, spec.Client, spec.IDs, spec.Ops, spec.Seed, func(op history.Op) { _ = enc.Encode(op) })
}

// startChild runs the test binary as a child with spec, returning the
// command and a scanner of its stdout.
func startChild(t testing.TB, spec childSpec) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// A child the test forgets to kill, or one that never prints what
	// the test waits for, must not hold the test until go test's own
	// timeout: it is killed, which ends the wait for its output, and the
	// test fails saying so.
	bound := time.AfterFunc(childBound, func() {
		t.Errorf("reliability: child %s ran longer than %v and was killed", spec.Role, childBound)
		_ = cmd.Process.Kill()
	})
	t.Cleanup(func() {
		bound.Stop()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return cmd, sc
}

// createAll creates every id in its initial state.
func createAll(t *testing.T, store storage.Store, ids []string) map[string]uint64 {
	t.Helper()
	revs, err := workload.CreateAll(context.Background(), store, ids)
	require.NoError(t, err)
	return revs
}

const checkTimeout = 2 * time.Minute

// childBound is the longest a child process of a test may run.
const childBound = 5 * time.Minute

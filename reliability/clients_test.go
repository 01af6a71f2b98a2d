package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/transition"
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
}

func artifacts() string {
	if d := os.Getenv("EXECFSM_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "artifacts")
}

// targets are the random moves: the running statuses an execution
// spends its life in, the init statuses it starts through and, for
// refusals, pending. No terminal status and not stopping (whose only
// ways out are terminal): an execution that ended would leave only
// refusals for the rest of the history.
var targets = []state.Status{
	state.Scheduling, state.Initializing, state.Running, state.Running, state.Paused, state.Paused,
	state.Failing, state.Recovering, state.Relocating, state.Relocating, state.Pending,
}

func refused(err error) bool { return errors.Is(err, transition.ErrNotAllowed) }

func noEffect(err error) bool {
	return errors.Is(err, transition.ErrConflict) || errors.Is(err, transition.ErrFenced)
}

// fireOps runs ops random Fire calls as one client on ids of store and
// hands each recorded operation to emit.
func fireOps(ctx context.Context, store transition.Store, client int, ids []string, ops int, seed uint64, emit func(history.Op)) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	execs := map[string]*transition.Persisted[state.Status]{}
	for _, id := range ids {
		p, err := transition.NewPersisted(state.Lifecycle(), store, id, transition.Actor(fmt.Sprint("client-", client)), transition.Retries(50))
		if err != nil {
			return err
		}
		execs[id] = p
	}
	for range ops {
		id := ids[rng.IntN(len(ids))]
		to := targets[rng.IntN(len(targets))]
		call := history.Now()
		c, err := execs[id].Fire(ctx, to, "random move")
		ret := history.Now()
		outcome, from := history.Classify(c, err, refused, noEffect)
		emit(history.Op{Client: client, ID: id, Kind: "fire", To: to.String(), Outcome: outcome, From: from.String(), Call: call, Return: ret})
	}
	return nil
}

// casOps runs ops random Get and CompareAndSwap calls on the raw store.
func casOps(ctx context.Context, store transition.Store, client int, ids []string, ops int, seed uint64, emit func(history.Op)) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	statuses := []string{"a", "b", "c", "d"}
	for range ops {
		id := ids[rng.IntN(len(ids))]
		call := history.Now()
		rec, err := store.Get(ctx, id)
		ret := history.Now()
		if err != nil {
			return err
		}
		emit(history.Op{Client: client, ID: id, Kind: "get", Status: rec.Status, Revision: rec.Revision, Call: call, Return: ret})
		next := rec.Clone()
		next.Status = statuses[rng.IntN(len(statuses))]
		call = history.Now()
		written, err := store.CompareAndSwap(ctx, id, rec.Revision, next)
		ret = history.Now()
		op := history.Op{Client: client, ID: id, Kind: "cas", Expect: rec.Revision, Status: next.Status, Call: call, Return: ret}
		var conflict *transition.ConflictError
		switch {
		case err == nil:
			op.Revision = written.Revision
		case errors.As(err, &conflict):
			op.Conflict, op.Revision = true, conflict.Current.Revision
		default:
			op.Failed = true
		}
		emit(op)
	}
	return nil
}

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
	cl, err := embedded.NewClient(spec.Etcd)
	if err != nil {
		return err
	}
	defer cl.Close()
	s, err := etcdstore.New(cl, etcdstore.Options{Prefix: spec.Prefix})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	return fireOps(ctx, s, spec.Client, spec.IDs, spec.Ops, spec.Seed, func(op history.Op) { _ = enc.Encode(op) })
}

// startChild runs the test binary as a child with spec, returning the
// command and a scanner of its stdout.
func startChild(t *testing.T, spec childSpec) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return cmd, sc
}

// createAll creates every id in its initial state.
func createAll(t *testing.T, store transition.Store, ids []string) map[string]uint64 {
	t.Helper()
	revs := map[string]uint64{}
	for _, id := range ids {
		p, err := transition.NewPersisted(state.Lifecycle(), store, id)
		require.NoError(t, err)
		rec, err := p.Create(context.Background(), transition.Update[state.Status]{To: state.Pending})
		require.NoError(t, err)
		revs[id] = rec.Revision
	}
	return revs
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = fmt.Sprintf("%s-%d", prefix, k)
	}
	return out
}

const checkTimeout = 2 * time.Minute

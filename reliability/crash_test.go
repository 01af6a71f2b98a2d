package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

type restartable struct{}

func (restartable) IsRestartable() bool { return true }

// announcing tells the parent, on stdout, of every write the store has
// made durable, before Persisted has returned or called its observers:
// a kill right after this line lands between the write and the hook.
type announcing struct{ storage.Store }

func (s announcing) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	rec, err := s.Store.CompareAndSwap(ctx, id, expect, next)
	if err == nil {
		fmt.Printf("cas %d %s\n", rec.Revision, rec.Status)
	}
	return rec, err
}

func (s announcing) Acquire(ctx context.Context, id string, l storage.Lease) (storage.Ownership, storage.Record, error) {
	own, rec, err := s.Store.Acquire(ctx, id, l)
	if err != nil {
		return nil, rec, err
	}
	fmt.Printf("cas %d %s\n", rec.Revision, rec.Status)
	return announcingOwnership{own}, rec, nil
}

// announcingOwnership tells the parent of the holder's durable writes, as
// announcing does of the store's.
type announcingOwnership struct{ storage.Ownership }

func (o announcingOwnership) CompareAndSwap(ctx context.Context, expect uint64, next storage.Record) (storage.Record, error) {
	rec, err := o.Ownership.CompareAndSwap(ctx, expect, next)
	if err == nil {
		fmt.Printf("cas %d %s\n", rec.Revision, rec.Status)
	}
	return rec, err
}

// childStore opens the store a child process is told to use (a bbolt
// file, or etcd under a prefix) and returns the function that closes it.
// A bbolt child waits for the file's lock, which a predecessor killed a
// moment ago may still hold.
func childStore(spec childSpec) (interface {
	storage.Store
	storage.Lister
	storage.Watcher
}, func(), error) {
	if spec.BoltPath != "" {
		db, err := boltstore.Open(spec.BoltPath, boltstore.Options{Timeout: 10 * time.Second, VerifyInBackground: spec.VerifyInBackground})
		if err != nil {
			return nil, nil, err
		}
		s, err := db.Store("executions")
		if err != nil {
			_ = db.Close()
			return nil, nil, err
		}
		return s, func() { _ = db.Close() }, nil
	}
	if spec.Kube != nil {
		s, err := spec.Kube.store()
		return s, func() {}, err
	}
	cl, err := embedded.NewClient(spec.Etcd)
	if err != nil {
		return nil, nil, err
	}
	s, err := etcdstore.New(cl, etcdstore.Options{Prefix: spec.Prefix})
	if err != nil {
		_ = cl.Close()
		return nil, nil, err
	}
	return s, func() { _ = cl.Close() }, nil
}

// childCrashWriter is a controller that starts with a recovery.Decider
// and then toggles its execution between running and paused until it is
// killed, saying what happened at each step:
//
//	verdict <decision> <to>   the startup decision
//	cas <rev> <status>        a write is durable (Persisted not returned yet)
//	hook <rev> <status>       the observer saw it
//	ack <rev> <status>        Fire returned it
func childCrashWriter(ctx context.Context, spec childSpec) error {
	store, closeStore, err := childStore(spec)
	if err != nil {
		return err
	}
	defer closeStore()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), announcing{store}, spec.IDs[0], transition.PersistedOptions{History: storage.MaxHistory}, transition.Observers[state.Status]{OnChange: []func(transition.Change[state.Status]){func(c transition.Change[state.Status]) { fmt.Printf("hook %d %s\n", c.Revision, c.To) }}})
	if err != nil {
		return err
	}
	// A killed predecessor's etcd lease must expire first: wait for it.
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	decider, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: restartable{}, Failovers: recovery.Allowance{Unlimited: true}})
	if err != nil {
		return err
	}
	v, err := decider.Start(startCtx, exec, storage.Lease{Holder: spec.Owner, TTL: 2 * time.Second, Wait: true})
	if err != nil {
		return err
	}
	fmt.Printf("verdict %s %s\n", v.Decision, v.To)
	if v.Decision == recovery.DecisionStart {
		if _, err := exec.Fire(ctx, state.Running, "controller ready"); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0))
	for {
		cur, _, err := exec.Load(ctx)
		if err != nil {
			return err
		}
		to := state.Paused
		if cur == state.Paused {
			to = state.Running
		}
		c, err := exec.Fire(ctx, to, "toggle")
		if err != nil {
			return err
		}
		fmt.Printf("ack %d %s\n", c.Revision, c.To)
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
}

type crashLine struct {
	kind   string
	rev    uint64
	status string
}

func parseCrashLine(t *testing.T, line string) crashLine {
	f := strings.Fields(line)
	require.Len(t, f, 3, "line %q", line)
	if f[0] == "verdict" {
		return crashLine{kind: f[0], status: f[2]}
	}
	rev, err := strconv.ParseUint(f[1], 10, 64)
	require.NoError(t, err)
	return crashLine{kind: f[0], rev: rev, status: f[2]}
}

// Controllers are SIGKILLed at random points, many of them right after a
// write became durable and before Persisted called its observer. After
// each kill the store must hold every acknowledged write and every write
// announced durable, the audit trail must be one legal path, observers
// must never have seen a write the store does not have, and the next
// controller's decision must match what the store holds.
func TestSIGKILLAtRandomPointsLosesNothingAndDecisionsAgree(t *testing.T) {
	for _, backend := range []string{"bolt", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			spec := childSpec{Role: "crash-writer", IDs: []string{"ex-crash"}}
			var store storage.Store
			var closeStore func()
			if backend == "bolt" {
				spec.BoltPath = filepath.Join(t.TempDir(), "db")
			} else {
				_, spec.Prefix = etcdStore(t)
				spec.Etcd = shared.Endpoints()
			}
			open := func() (storage.Store, func()) {
				s, c, err := childStore(spec)
				require.NoError(t, err)
				return s, c
			}
			store, closeStore = open()
			createAll(t, store, spec.IDs)
			p, err := transition.NewPersisted(teraslice.Lifecycle(), store, spec.IDs[0], transition.PersistedOptions{})
			require.NoError(t, err)
			for _, to := range []state.Status{state.Scheduling, state.Initializing} {
				_, err := p.Fire(context.Background(), to, "master")
				require.NoError(t, err)
			}
			closeStore()

			rounds := 6
			var lastAck, lastDurable uint64
			for round := range rounds {
				spec.Owner, spec.Seed = fmt.Sprint("pod-", round), uint64(round)
				cmd, out := startChild(t, spec)
				killAt := 5 + rand.IntN(60)
				betweenWriteAndHook := round%2 == 0
				var seen []crashLine
				for out.Scan() {
					l := parseCrashLine(t, out.Text())
					seen = append(seen, l)
					if l.kind == "verdict" {
						wantResume := round > 0
						require.Equal(t, wantResume, strings.HasPrefix(out.Text(), "verdict resume"), "round %d: %s", round, out.Text())
						continue
					}
					killAt--
					if killAt <= 0 && (!betweenWriteAndHook || l.kind == "cas") {
						require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
						break
					}
				}
				for out.Scan() { // lines already in the pipe
					seen = append(seen, parseCrashLine(t, out.Text()))
				}
				_ = cmd.Wait()

				durable := map[uint64]string{}
				for _, l := range seen {
					switch l.kind {
					case "cas":
						durable[l.rev] = l.status
						lastDurable = max(lastDurable, l.rev)
					case "ack":
						lastAck = max(lastAck, l.rev)
					}
				}
				for _, l := range seen {
					if l.kind == "hook" || l.kind == "ack" {
						require.Equal(t, l.status, durable[l.rev], "round %d: %s %d was never made durable", round, l.kind, l.rev)
					}
				}

				store, closeStore = open()
				rec, err := store.Get(context.Background(), spec.IDs[0])
				require.NoError(t, err)
				require.GreaterOrEqual(t, rec.Revision, lastAck, "round %d: an acknowledged write is missing", round)
				require.GreaterOrEqual(t, rec.Revision, lastDurable, "round %d: a durable write is missing", round)
				if rec.Revision == lastDurable {
					require.Equal(t, durable[lastDurable], rec.Status)
				}
				requireLegalTrail(t, rec)
				require.Equal(t, strconv.Itoa(round), restartsIn(rec), "round %d: one unexpected restart counted per kill", round)
				closeStore()
			}
		})
	}
}

func restartsIn(rec storage.Record) string {
	v := rec.Meta[recovery.MetaFailovers]
	if v == "" {
		return "0"
	}
	return strconv.Itoa(len(strings.Split(v, ",")))
}

// requireLegalTrail checks that the audit trail is one connected path of
// moves the lifecycle allows, ending where the record is.
func requireLegalTrail(t testing.TB, rec storage.Record) {
	t.Helper()
	table := teraslice.Lifecycle()
	trail := rec.History.Entries()
	for k := 1; k < len(trail); k++ {
		prev, e := trail[k-1], trail[k]
		require.Equal(t, prev.To, e.From, "trail entry %d", k)
		require.Greater(t, e.Revision, prev.Revision, "trail entry %d", k)
		if e.From != e.To {
			from, err1 := table.Parse(e.From)
			to, err2 := table.Parse(e.To)
			require.NoError(t, err1)
			require.NoError(t, err2)
			require.True(t, table.Allowed(from, to), "trail entry %d: %s → %s", k, e.From, e.To)
		}
	}
	if n := len(trail); n > 0 {
		require.Equal(t, rec.Status, trail[n-1].To)
	}
}

func childLeaseHolder(ctx context.Context, spec childSpec) error {
	s, closeStore, err := childStore(spec)
	if err != nil {
		return err
	}
	defer closeStore()
	ttl, err := time.ParseDuration(spec.TTL)
	if err != nil {
		return err
	}
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, spec.IDs[0], transition.PersistedOptions{})
	if err != nil {
		return err
	}
	_, _, err = exec.Acquire(ctx, storage.Lease{Holder: spec.Owner, TTL: ttl}, nil)
	if err != nil {
		return err
	}
	fmt.Printf("acquired %d\n", exec.Claim().Epoch)
	lost := exec.Ownership().Lost()
	for n := 0; ; n++ {
		select {
		case <-lost:
			// Say so, and keep writing: an owner that was stopped learns
			// it lost the lease only after it has already tried.
			fmt.Println("lost")
			lost = nil
		default:
		}
		c, _, err := exec.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
			return transition.To(cur).Set("n", strconv.Itoa(n)), nil
		})
		switch {
		case err == nil:
			fmt.Println("write ok", c.Revision) // the revision tells when it landed, whenever it is read
		case errors.Is(err, storage.ErrFenced):
			fmt.Println("write fenced")
			return nil
		default:
			fmt.Println("write error", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// decider is the Decider of roles and p, for a test.
func decider[S comparable](t testing.TB, roles *recovery.Roles[S], p recovery.Policy) *recovery.Decider[S] {
	t.Helper()
	d, err := recovery.NewDecider(roles, p)
	require.NoError(t, err)
	return d
}

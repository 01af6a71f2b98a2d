// Volcano shows, with real processes, Volcano's batch Job lifecycle in
// execfsm: ten phases, three drains each with its own end, a suspended
// Job parked until a user resumes it, retries counted on the moves into
// Restarting and limited by each Job's maxRetry, and a controller-manager
// that drives every Job while the Jobs' pods run without it.
//
// The table, its roles and the state machine are in volcano.go; its
// tests check them against every case of Volcano's own unit tests. This
// demo is the controller-manager's life. The supervisor creates Jobs in
// eight phases, each with the pods a fake kubelet reports for it (a file
// per Job). The managers are leader-elected: each holds one lease, on
// the leader record, and every Job it drives is held under it
// (storage.Lease.Under). Manager A starts in execfsm's manager mode
// (recovery.Policy.Manager), adopts every Job through a reconcile.Loop
// and syncs each. It is sent SIGTERM: it hands every Job over (nothing
// written, its ownership released), lets its lease go and exits 0.
// Manager B takes every Job over at once, not waiting out A's one-minute
// lease; each is in its phase and nothing was counted against it. B is
// SIGKILLed; manager C waits out B's two-second lease, once, and takes
// every Job over, again in its phase. It prints what each manager did and PASS or FAIL, and exits
// non-zero on FAIL. Ctrl-C stops everything and removes what it created.
//
//	go run ./examples/volcano
//	go run ./examples/volcano -store etcd -etcd http://127.0.0.1:2379
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
)

// roles are this binary's: the example's children, and its supervisor.
var roles = proc.Roles{Run: map[string]func(json.RawMessage) int{"manager": runManager}, Supervise: supervise}

func main() { roles.Main() }

// child runs this binary as one of the example's children.
func child(spec proc.Spec) int { return roles.Child(spec) }

func supervise(args []string, out io.Writer) int {
	var f stores.Flags
	var verbose bool
	return proc.Supervise("volcano", args, out, func(fs *flag.FlagSet) {
		f.Register(fs, "etcd")
		fs.BoolVar(&verbose, "v", false, "echo everything the managers print")
	}, func(ctx context.Context, out io.Writer) (bool, error) { return demo(ctx, f, verbose, out) })
}

// waitLong bounds every wait on a manager: far longer than any step
// takes, so a regression fails with a name instead of hanging.
const waitLong = 60 * time.Second

// A handed-over Job must be taken over at once: its manager's ownership
// lasts a minute, so a successor that waited for it would be caught. A
// crashed manager's lasts two seconds, which its successor waits out.
const (
	handedOverTTL = time.Minute
	crashedTTL    = 2 * time.Second
)

// job is one Job the demo creates: its phase, and what its pods are so
// that a sync leaves it there.
type job struct {
	id    string
	phase Phase
	world world
}

var jobs = []job{
	{"mnist", Pending, world{Spec: Spec{MinAvailable: 3, Tasks: []Task{{Name: "worker", Replicas: 3}}}}},
	{"resnet", Running, world{Spec: Spec{MinAvailable: 2, Tasks: []Task{{Name: "worker", Replicas: 2}}}, Pods: Pods{Running: 2}}},
	{"bert", Restarting, world{Spec: Spec{MinAvailable: 1, Tasks: []Task{{Name: "worker", Replicas: 2}}}, Pods: Pods{Terminating: 2}}},
	{"gpt-sweep", Aborting, world{Spec: Spec{MinAvailable: 1, Tasks: []Task{{Name: "worker", Replicas: 1}}}, Pods: Pods{Running: 1}}},
	{"suspended", Aborted, world{Spec: Spec{MinAvailable: 1, Tasks: []Task{{Name: "worker", Replicas: 1}}}}},
	{"etl", Completing, world{Spec: Spec{MinAvailable: 1, Tasks: []Task{{Name: "worker", Replicas: 1}}}, Pods: Pods{Running: 1}}},
	{"cancelled", Terminating, world{Spec: Spec{MinAvailable: 1, Tasks: []Task{{Name: "worker", Replicas: 1}}}, Pods: Pods{Terminating: 1}}},
	{"done", Completed, world{Spec: Spec{MinAvailable: 1, Tasks: []Task{{Name: "worker", Replicas: 1}}}, Pods: Pods{Succeeded: 1}}},
}

func demo(ctx context.Context, f stores.Flags, verbose bool, out io.Writer) (bool, error) {
	if f.Kind != "etcd" {
		return false, fmt.Errorf("-store %s: the managers and the demo read the Jobs at once, from their own processes: use etcd (a bolt file is one process's at a time)", f.Kind)
	}
	dir, err := os.MkdirTemp("", "execfsm-volcano-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	proc.Emit("workdir", "path", dir)
	worldDir := filepath.Join(dir, "world")
	if err := os.Mkdir(worldDir, 0o755); err != nil {
		return false, err
	}
	cfg, stopBackend, err := f.Setup(dir)
	if err != nil {
		return false, err
	}
	defer stopBackend()
	fmt.Fprintf(out, "store: %s %s\n", cfg.Kind, strings.Join(cfg.Etcd, ","))
	proc.Emit("store", "kind", cfg.Kind, "endpoint", strings.Join(cfg.Etcd, ","))
	if err := createJobs(ctx, cfg, worldDir); err != nil {
		return false, err
	}
	before, err := phases(cfg)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "jobs: %s\n", summary(before))

	g := &proc.Group{Echo: out}
	if !verbose {
		g.Show = func(line string) bool {
			for _, p := range []string{"ready ", "error", "sync "} {
				if strings.HasPrefix(line, p) {
					return true
				}
			}
			return strings.Contains(line, "msg=SIGTERM ")
		}
	}
	defer g.KillAll()
	manager := func(name string, ttl time.Duration) (*proc.Child, error) {
		c, err := g.Start(name, "manager", managerConfig{Store: cfg, World: worldDir, Holder: name, TTL: ttl})
		if err != nil {
			return nil, err
		}
		proc.Emit("manager", "name", name, "pid", fmt.Sprint(c.PID()))
		ev, err := c.Await(ctx, "ready", nil, waitLong)
		if err != nil {
			return nil, fmt.Errorf("%s never became ready: %w", name, err)
		}
		if got := ev.Attrs["adopted"]; got != fmt.Sprint(len(jobs)-1) {
			return nil, fmt.Errorf("%s drives %s jobs, want %d (all but the completed one)", name, got, len(jobs)-1)
		}
		return c, nil
	}
	var failures []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}

	fmt.Fprintln(out, "\nmanager-a starts and adopts every job")
	a, err := manager("manager-a", handedOverTTL)
	if err != nil {
		return false, err
	}
	adopted, err := phases(cfg)
	if err != nil {
		return false, err
	}
	check(samePhases(before, adopted), "manager-a moved jobs: %s", summary(adopted))
	check(ownedBy(adopted, "manager-a"), "manager-a does not own every live job: %s", owners(adopted))

	fmt.Fprintln(out, "\nmanager-a is sent SIGTERM: it hands every job over")
	if err := a.Signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	exit, err := a.Wait(ctx, waitLong)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "manager-a exited: %s\n", exit)
	check(exit.Code == 0, "manager-a exited %s, want 0", exit)
	handed, err := phases(cfg)
	if err != nil {
		return false, err
	}
	check(unchanged(adopted, handed), "the hand-over wrote to jobs")

	fmt.Fprintln(out, "\nmanager-b starts at once: a handed-over job is free")
	started := time.Now()
	b, err := manager("manager-b", crashedTTL)
	if err != nil {
		return false, err
	}
	took := time.Since(started)
	fmt.Fprintf(out, "manager-b took every job over in %v (manager-a's lease would have lasted %v)\n", took.Round(time.Millisecond), handedOverTTL)
	check(took < handedOverTTL, "manager-b waited for manager-a's lease")
	atB, err := phases(cfg)
	if err != nil {
		return false, err
	}
	check(samePhases(before, atB), "manager-b moved jobs: %s", summary(atB))
	check(ownedBy(atB, "manager-b"), "manager-b does not own every live job: %s", owners(atB))
	check(noFailovers(atB), "a failover was counted")

	fmt.Fprintln(out, "\nmanager-b is SIGKILLed; manager-c waits out its lease")
	if err := b.Signal(syscall.SIGKILL); err != nil {
		return false, err
	}
	if _, err := b.Wait(ctx, waitLong); err != nil {
		return false, err
	}
	c, err := manager("manager-c", crashedTTL)
	if err != nil {
		return false, err
	}
	atC, err := phases(cfg)
	if err != nil {
		return false, err
	}
	check(samePhases(before, atC), "manager-c moved jobs: %s", summary(atC))
	check(ownedBy(atC, "manager-c"), "manager-c does not own every live job: %s", owners(atC))
	check(noFailovers(atC), "a failover was counted")
	if err := c.Signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	if exit, err := c.Wait(ctx, waitLong); err != nil || exit.Code != 0 {
		check(false, "manager-c exited %v, %v; want 0", exit, err)
	}

	fmt.Fprintf(out, "\njobs: %s\n", summary(atC))
	if len(failures) > 0 {
		fmt.Fprintln(out, "FAIL:\n  "+strings.Join(failures, "\n  "))
		return false, nil
	}
	fmt.Fprintln(out, "PASS: every job stayed in its phase through a hand-over and a crash of its manager, all held under one lease; the hand-over waited for nothing")
	return true, nil
}

// createJobs writes each Job's record in its phase (as the API server
// holds a Job) and its pods (as the fake kubelet reports them).
func createJobs(ctx context.Context, cfg stores.Config, worldDir string) error {
	store, closeStore, err := cfg.Open()
	if err != nil {
		return err
	}
	defer closeStore()
	table := volcano.Lifecycle()
	for _, j := range jobs {
		user, err := transition.NewPersisted(table, store, j.id, transition.PersistedOptions{Actor: "vcctl"})
		if err != nil {
			return err
		}
		if _, err := user.Create(ctx, transition.Update[Phase]{To: j.phase, Meta: limitMeta(j.world.Spec)}); err != nil {
			return err
		}
		data, err := json.Marshal(j.world)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(worldDir, j.id+".json"), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// phases reads every Job's record.
func phases(cfg stores.Config) (map[string]storage.Record, error) {
	store, closeStore, err := cfg.Open()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	out := map[string]storage.Record{}
	for _, j := range jobs {
		rec, err := store.Get(context.Background(), j.id)
		if err != nil {
			return nil, err
		}
		out[j.id] = rec
	}
	return out, nil
}

func samePhases(a, b map[string]storage.Record) bool {
	for id, rec := range a {
		if b[id].Status != rec.Status {
			return false
		}
	}
	return true
}

// unchanged says whether nothing was written to any Job.
func unchanged(a, b map[string]storage.Record) bool {
	for id, rec := range a {
		if b[id].Revision != rec.Revision {
			return false
		}
	}
	return true
}

func ownedBy(recs map[string]storage.Record, holder string) bool {
	for _, j := range jobs {
		if j.phase != Completed && recs[j.id].Owner != holder {
			return false
		}
	}
	return true
}

func noFailovers(recs map[string]storage.Record) bool {
	for _, rec := range recs {
		if rec.Meta[recovery.MetaFailovers] != "" {
			return false
		}
	}
	return true
}

func summary(recs map[string]storage.Record) string {
	parts := make([]string, 0, len(jobs))
	for _, j := range jobs {
		parts = append(parts, j.id+"="+recs[j.id].Status)
	}
	return strings.Join(parts, " ")
}

func owners(recs map[string]storage.Record) string {
	parts := make([]string, 0, len(jobs))
	for _, j := range jobs {
		parts = append(parts, fmt.Sprintf("%s@%s/%d", j.id, recs[j.id].Owner, recs[j.id].Epoch))
	}
	return strings.Join(parts, " ")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

const (
	slicesPerExecution = 100
	oomBudget          = 2
	waitLong           = 60 * time.Second
)

// scenario is one story the supervisor plays.
type scenario struct {
	name   string
	about  string
	shared bool // needs two processes on the store at once
	play   func(ctx context.Context, s *supervisor, id string) error
}

var scenarios = []scenario{
	{"drain", "node drain: SIGTERM → relocating → a new controller resumes and completes", false, drain},
	{"oom", "OOM kills: resume within the budget, then fail with the reason, never a crash loop", false, oom},
	{"stop", "cluster-master stop: stopping, then SIGTERM → clean shutdown to stopped", true, stop},
	{"race", "SIGTERM while the master writes stopping → exactly one outcome", true, race},
	{"overlap", "the old controller is still alive when the new one takes over → its write is fenced", true, overlap},
}

func scenarioNames() []string {
	var names []string
	for _, sc := range scenarios {
		names = append(names, sc.name)
	}
	return names
}

// supervisor plays the platform (it starts, signals and kills
// controllers) and the cluster master (it creates executions and writes
// stopping).
type supervisor struct {
	out    io.Writer
	store  stores.Config
	group  *proc.Group
	mu     sync.Mutex
	shared storage.Store // the master's own handle, for stores that allow one
	close  func()
	pods   int
}

// run plays the scenarios; out must be safe for concurrent writes.
func run(ctx context.Context, o options, out io.Writer) (bool, error) {
	want := strings.Split(o.scenarios, ",")
	for _, name := range want {
		if !slices.Contains(scenarioNames(), name) {
			return false, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames(), ", "))
		}
	}
	if o.store.Kind == "memory" {
		return false, errors.New("-store memory lives in one process; the controllers are processes: use etcd or bolt")
	}
	dir, err := os.MkdirTemp("", "execfsm-relocation-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(out, "working directory: %s\n", dir)
	proc.Emit("workdir", "path", dir)
	cfg, stopBackend, err := o.store.Setup(dir)
	if err != nil {
		return false, err
	}
	defer stopBackend()
	// Show what the controllers decide; with -v, everything they say.
	s := &supervisor{out: out, store: cfg, group: &proc.Group{Echo: out}}
	if !o.verbose {
		s.group.Show = func(line string) bool {
			for _, p := range []string{"verdict ", "owner ", "terminate ", "late write ", "error "} {
				if strings.HasPrefix(line, p) {
					return true
				}
			}
			return false
		}
	}
	defer s.group.KillAll()
	if cfg.Kind != "bolt" {
		if s.shared, s.close, err = cfg.Open(); err != nil {
			return false, err
		}
		defer s.close()
	}
	fmt.Fprintf(out, "store: %s %s\n", cfg.Kind, strings.Join(cfg.Etcd, ","))
	proc.Emit("store", "kind", cfg.Kind, "endpoint", strings.Join(cfg.Etcd, ","))

	type result struct {
		name, verdict string
	}
	var results []result
	allPassed := true
	for _, sc := range scenarios {
		if !slices.Contains(want, sc.name) {
			continue
		}
		fmt.Fprintf(out, "\n== %s: %s\n", sc.name, sc.about)
		if sc.shared && cfg.Kind == "bolt" {
			fmt.Fprintln(out, "SKIP: bbolt locks its file to one process, and this scenario needs two on the store at once (use -store etcd)")
			results = append(results, result{sc.name, "SKIP"})
			continue
		}
		id := "ex-" + sc.name
		err := sc.play(ctx, s, id)
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		s.timeline(id)
		verdict := "PASS"
		if err != nil {
			verdict = "FAIL: " + err.Error()
			allPassed = false
		}
		fmt.Fprintf(out, "%s %s\n", verdict, sc.name)
		results = append(results, result{sc.name, verdict})
	}
	fmt.Fprintln(out, "\nSummary:")
	for _, r := range results {
		fmt.Fprintf(out, "  %-8s %s\n", r.name, r.verdict)
	}
	return allPassed, nil
}

// withStore runs fn on the store: the master's shared handle, or for
// bbolt the file opened just for fn, since a controller may hold it
// otherwise.
func (s *supervisor) withStore(fn func(storage.Store) error) error {
	if s.shared != nil {
		return fn(s.shared)
	}
	st, closeStore, err := s.store.Open()
	if err != nil {
		return err
	}
	defer closeStore()
	return fn(st)
}

func (s *supervisor) master(st storage.Store, id string) (*transition.Persisted[state.Status], error) {
	return transition.NewPersisted(teraslice.Lifecycle(), st, id, transition.PersistedOptions{Actor: "master", History: storage.MaxHistory})
}

// submit creates the execution and schedules it, as the cluster master.
func (s *supervisor) submit(ctx context.Context, id string) error {
	return s.withStore(func(st storage.Store) error {
		m, err := s.master(st, id)
		if err != nil {
			return err
		}
		// The table, beside the records, for the operator's tools.
		if _, err := schema.Save(ctx, st, "teraslice", teraslice.Roles()); err != nil {
			return err
		}
		// Recorded at creation as Teraslice's master does after validating
		// the job; each controller refreshes it from its work on startup.
		submitted := transition.To(state.Pending).Because("job submitted").Set(recovery.MetaRelocatable, "true")
		if _, err := m.Create(ctx, submitted); err != nil {
			return err
		}
		if _, err := m.Fire(ctx, state.Scheduling, "allocator dequeued it"); err != nil {
			return err
		}
		_, err = m.Fire(ctx, state.Initializing, "execution controller placed")
		return err
	})
}

// masterStop writes stopping, as the cluster master's stop API does.
func (s *supervisor) masterStop(ctx context.Context, id string) error {
	return s.withStore(func(st storage.Store) error {
		m, err := s.master(st, id)
		if err != nil {
			return err
		}
		_, err = m.Fire(ctx, state.Stopping, "user asked to stop")
		return err
	})
}

func (s *supervisor) record(ctx context.Context, id string) (storage.Record, error) {
	var rec storage.Record
	err := s.withStore(func(st storage.Store) error {
		var err error
		rec, err = st.Get(ctx, id)
		return err
	})
	return rec, err
}

// controller starts a new controller pod for the execution.
func (s *supervisor) controller(id string, tweak func(*controllerConfig)) (*proc.Child, error) {
	s.mu.Lock()
	s.pods++
	name := fmt.Sprintf("pod-%d", s.pods)
	s.mu.Unlock()
	cfg := controllerConfig{Store: s.store, Execution: id, Name: name, Slices: slicesPerExecution, Restartable: true, Budget: oomBudget}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := s.group.Start(name, "controller", cfg)
	if err == nil {
		fmt.Fprintf(s.out, "  %s started (pid %d)\n", name, c.PID())
		proc.Emit("pod-started", "name", name, "pid", strconv.Itoa(c.PID()))
	}
	return c, err
}

func (s *supervisor) exit(ctx context.Context, c *proc.Child) (proc.Exit, error) {
	e, err := c.Wait(ctx, waitLong)
	if err == nil {
		fmt.Fprintf(s.out, "  %s ended: %s\n", c.Name, e)
	}
	return e, err
}

func (s *supervisor) signal(c *proc.Child, sig syscall.Signal) error {
	fmt.Fprintf(s.out, "  platform sends %s to %s\n", proc.SignalName(sig), c.Name)
	return c.Signal(sig)
}

// timeline prints the execution's audit trail.
func (s *supervisor) timeline(id string) {
	rec, err := s.record(context.Background(), id)
	if err != nil {
		fmt.Fprintf(s.out, "  (no timeline: %v)\n", err)
		return
	}
	fmt.Fprintf(s.out, "  timeline of %s:\n", id)
	for _, e := range rec.History.All() {
		at := e.At.Local().Format("15:04:05.000")
		who := e.Actor
		if e.Owner != "" {
			who = fmt.Sprintf("%s@%d", e.Owner, e.Epoch)
		}
		switch {
		case e.From == "":
			fmt.Fprintf(s.out, "    %s  %-8s %-12s   %-12s %s\n", at, who, "(created)", e.To, e.Reason)
		case e.From == e.To && e.Reason == "":
			// a progress checkpoint: no status change, nothing to tell
		case e.From == e.To:
			fmt.Fprintf(s.out, "    %s  %-8s %-12s   %-12s %s\n", at, who, e.From, "(owner)", e.Reason)
		default:
			fmt.Fprintf(s.out, "    %s  %-8s %-12s → %-12s %s\n", at, who, e.From, e.To, e.Reason)
		}
	}
	fmt.Fprintf(s.out, "  final: %s, owner %s at epoch %d\n", rec.Status, rec.Owner, rec.Epoch)
}

func visited(rec storage.Record, status state.Status) bool {
	for _, e := range rec.History.All() {
		if e.To == status.String() && e.From != e.To {
			return true
		}
	}
	return false
}

func expect(cond bool, format string, args ...any) error {
	if cond {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func drain(ctx context.Context, s *supervisor, id string) error {
	if err := s.submit(ctx, id); err != nil {
		return err
	}
	c1, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if _, err := c1.Await(ctx, "slices", map[string]string{"done": "20"}, waitLong); err != nil {
		return err
	}
	if err := s.signal(c1, syscall.SIGTERM); err != nil {
		return err
	}
	e1, err := s.exit(ctx, c1)
	if err != nil {
		return err
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return err
	}
	if err := expect(rec.Status == "relocating" && rec.Previous == "running" && e1.Code == 143,
		"after SIGTERM want relocating (from running) and exit 143, got %s (from %s), %s", rec.Status, rec.Previous, e1); err != nil {
		return err
	}
	c2, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if _, err := c2.Await(ctx, "verdict", map[string]string{"decision": "resume", "to": "running"}, waitLong); err != nil {
		return err
	}
	if _, err := c2.Await(ctx, "status", map[string]string{"status": "completed"}, waitLong); err != nil {
		return err
	}
	if _, err := s.exit(ctx, c2); err != nil {
		return err
	}
	rec, err = s.record(ctx, id)
	if err != nil {
		return err
	}
	return expect(rec.Status == "completed" && rec.Owner == c2.Name && rec.Epoch == 2,
		"want completed by %s at epoch 2, got %s by %s at epoch %d", c2.Name, rec.Status, rec.Owner, rec.Epoch)
}

func oom(ctx context.Context, s *supervisor, id string) error {
	if err := s.submit(ctx, id); err != nil {
		return err
	}
	// Kill a running controller budget+1 times; each restart within the
	// budget resumes, the next one fails the execution.
	for kill := 1; kill <= oomBudget+1; kill++ {
		c, err := s.controller(id, nil)
		if err != nil {
			return err
		}
		want := map[string]string{"decision": "start"}
		if kill > 1 {
			want = map[string]string{"decision": "resume", "to": "running"}
		}
		if _, err := c.Await(ctx, "verdict", want, waitLong); err != nil {
			return err
		}
		if _, err := c.Await(ctx, "slices", map[string]string{"done": "10"}, waitLong); err != nil {
			return err
		}
		if err := s.signal(c, syscall.SIGKILL); err != nil {
			return err
		}
		if _, err := s.exit(ctx, c); err != nil {
			return err
		}
	}
	failing, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if _, err := failing.Await(ctx, "verdict", map[string]string{"decision": "fail", "to": "failed"}, waitLong); err != nil {
		return err
	}
	e, err := s.exit(ctx, failing)
	if err != nil {
		return err
	}
	if err := expect(e.Code == exitFailed, "the controller past the budget: want exit %d, got %s", exitFailed, e); err != nil {
		return err
	}
	// The platform restarts it once more: it refuses at once, writes nothing.
	again, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if e, err = s.exit(ctx, again); err != nil {
		return err
	}
	if err := expect(e.Code == exitRefused, "a start after the failure: want exit %d (refused), got %s", exitRefused, e); err != nil {
		return err
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return err
	}
	return expect(rec.Status == "failed" && strings.Contains(rec.Reason, "failovers spent"),
		"want failed with the budget as reason, got %s: %q", rec.Status, rec.Reason)
}

func stop(ctx context.Context, s *supervisor, id string) error {
	if err := s.submit(ctx, id); err != nil {
		return err
	}
	c1, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if _, err := c1.Await(ctx, "slices", map[string]string{"done": "10"}, waitLong); err != nil {
		return err
	}
	fmt.Fprintln(s.out, "  master writes stopping")
	if err := s.masterStop(ctx, id); err != nil {
		return err
	}
	if err := s.signal(c1, syscall.SIGTERM); err != nil {
		return err
	}
	e, err := s.exit(ctx, c1)
	if err != nil {
		return err
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return err
	}
	return expect(rec.Status == "stopped" && e.Code == 0 && !visited(rec, state.Relocating),
		"want stopped, exit 0, never relocating; got %s, %s", rec.Status, e)
}

func race(ctx context.Context, s *supervisor, id string) error {
	if err := s.submit(ctx, id); err != nil {
		return err
	}
	c1, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if _, err := c1.Await(ctx, "slices", map[string]string{"done": "10"}, waitLong); err != nil {
		return err
	}
	fmt.Fprintln(s.out, "  master writes stopping while the platform sends SIGTERM")
	var wg sync.WaitGroup
	var stopErr, sigErr error
	wg.Add(2)
	go func() { defer wg.Done(); stopErr = s.masterStop(ctx, id) }()
	go func() { defer wg.Done(); sigErr = c1.Signal(syscall.SIGTERM) }()
	wg.Wait()
	if err := errors.Join(stopErr, sigErr); err != nil {
		return err
	}
	e1, err := s.exit(ctx, c1)
	if err != nil {
		return err
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return err
	}
	relocated := visited(rec, state.Relocating)
	if relocated {
		fmt.Fprintln(s.out, "  outcome: the controller relocated first; its successor finds stopping and finishes the stop")
		if err := expect(e1.Code == 143, "relocated, so want exit 143, got %s", e1); err != nil {
			return err
		}
		c2, err := s.controller(id, nil)
		if err != nil {
			return err
		}
		if _, err := c2.Await(ctx, "verdict", map[string]string{"decision": "stop"}, waitLong); err != nil {
			return err
		}
		if _, err := s.exit(ctx, c2); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(s.out, "  outcome: the controller saw stopping and shut down")
		if err := expect(e1.Code == 0, "shut down, so want exit 0, got %s", e1); err != nil {
			return err
		}
	}
	rec, err = s.record(ctx, id)
	if err != nil {
		return err
	}
	return expect(rec.Status == "stopped", "want stopped either way, got %s", rec.Status)
}

func overlap(ctx context.Context, s *supervisor, id string) error {
	if err := s.submit(ctx, id); err != nil {
		return err
	}
	c1, err := s.controller(id, func(c *controllerConfig) { c.LateWrite = true })
	if err != nil {
		return err
	}
	if _, err := c1.Await(ctx, "slices", map[string]string{"done": "10"}, waitLong); err != nil {
		return err
	}
	if err := s.signal(c1, syscall.SIGTERM); err != nil {
		return err
	}
	if _, err := c1.Await(ctx, "lingering", nil, waitLong); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "  %s is still alive; the platform starts its successor\n", c1.Name)
	c2, err := s.controller(id, nil)
	if err != nil {
		return err
	}
	if _, err := c2.Await(ctx, "status", map[string]string{"status": "running"}, waitLong); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "  %s, still alive, tries to write\n", c1.Name)
	if err := c1.Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	if _, err := c1.Await(ctx, "late-write", map[string]string{"result": "fenced"}, waitLong); err != nil {
		return err
	}
	if _, err := s.exit(ctx, c1); err != nil {
		return err
	}
	if _, err := c2.Await(ctx, "status", map[string]string{"status": "completed"}, waitLong); err != nil {
		return err
	}
	if _, err := s.exit(ctx, c2); err != nil {
		return err
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return err
	}
	return expect(rec.Status == "completed" && rec.Owner == c2.Name, "want completed by %s, got %s by %s", c2.Name, rec.Status, rec.Owner)
}

// Reconcile shows, with real processes, the VILLAScontroller case: a
// manager that crashes must recover the simulators it controlled from the
// world, not from a private checkpoint that has drifted.
//
// The simulators are real child processes. Each keeps its identity where
// the world keeps it (a label file next to its pid, as a Kubernetes Job
// carries simulator UUID, manager UUID, name, location, realm and owner
// in its metadata) and reports its own state (idle, starting, running,
// paused, stopping, error, gone: the VILLAS states, a user-defined
// transition.Table).
//
// The manager is a controller on a table of its own (the VILLAS states
// plus relocating), and takes each simulator over with the same startup
// and SIGTERM decisions an execution controller makes (package recovery,
// with the simulator table's roles).
//
// The demo: a manager creates three simulators and is SIGKILLed. While
// it is down a user kills one simulator and pauses another. A new manager
// starts, runs a reconcile.Loop whose first pass lists the world, adopts
// the two survivors under their own UUIDs (taking each over: "resume", an
// unexpected restart within the budget), learns from its store that the
// third is gone and marks it so, and picks up the pause. Then the
// platform moves it (SIGTERM): it marks the simulators it drives
// relocating, remembering running and paused, and exits 143; a third
// manager resumes each where it was. It prints the views and PASS or
// FAIL, and exits non-zero on FAIL. Ctrl-C stops everything and removes
// what it created.
//
//	go run ./examples/reconcile
//	go run ./examples/reconcile -store bolt
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
)

// roles are this binary's: the example's children, and its supervisor.
var roles = proc.Roles{Run: map[string]func(json.RawMessage) int{"manager": runManager, "simulator": runSimulator}, Supervise: supervise}

func main() { roles.Main() }

// child runs this binary as one of the example's children.
func child(spec proc.Spec) int { return roles.Child(spec) }

func supervise(args []string, out io.Writer) int {
	var f stores.Flags
	var verbose bool
	return proc.Supervise("reconcile", args, out, func(fs *flag.FlagSet) {
		f.Register(fs, "etcd")
		fs.BoolVar(&verbose, "v", false, "echo everything the managers print")
	}, func(ctx context.Context, out io.Writer) (bool, error) { return run(ctx, f, verbose, out) })
}

const waitLong = 60 * time.Second

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func run(ctx context.Context, f stores.Flags, verbose bool, out io.Writer) (bool, error) {
	if f.Kind == "memory" {
		return false, errors.New("-store memory lives in one process; the managers are processes: use etcd or bolt")
	}
	dir, err := os.MkdirTemp("", "execfsm-reconcile-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(out, "working directory: %s\n", dir)
	proc.Emit("workdir", "path", dir)
	w := world{filepath.Join(dir, "world")}
	if err := os.Mkdir(w.dir, 0o755); err != nil {
		return false, err
	}
	defer w.killAll()
	cfg, stopBackend, err := f.Setup(dir)
	if err != nil {
		return false, err
	}
	defer stopBackend()
	fmt.Fprintf(out, "store: %s %s\n", cfg.Kind, strings.Join(cfg.Etcd, ","))
	proc.Emit("store", "kind", cfg.Kind, "endpoint", strings.Join(cfg.Etcd, ","))

	g := &proc.Group{Echo: out}
	if !verbose {
		g.Show = func(line string) bool {
			for _, p := range []string{"started ", "adopt ", "lost ", "recovery ", "error ", "take over ", "relocate ", "shutdown ", "leave "} {
				if strings.HasPrefix(line, p) {
					return true
				}
			}
			return false
		}
	}
	defer g.KillAll()

	mgr := newUUID()
	sims := []label{
		{UUID: newUUID(), Manager: mgr, Name: "dpsim-grid", Location: "aachen", Realm: "ieee14", Owner: "alice"},
		{UUID: newUUID(), Manager: mgr, Name: "opal-rt", Location: "lyon", Realm: "ieee14", Owner: "bob"},
		{UUID: newUUID(), Manager: mgr, Name: "rtds-hil", Location: "turin", Realm: "cigre", Owner: "carol"},
	}
	survivor, killed, paused := sims[0], sims[1], sims[2]
	mcfg := managerConfig{Store: cfg, World: w.dir, UUID: mgr, Create: sims, Timeout: 20 * time.Second}

	fmt.Fprintf(out, "\nmanager %s starts and creates three simulators\n", mgr)
	m1, err := g.Start("manager-1", "manager", mcfg)
	if err != nil {
		return false, err
	}
	if _, err := m1.Await(ctx, "ready", nil, waitLong); err != nil {
		return false, err
	}
	before := views(m1.Events())
	printView(out, "before the crash", before)
	var pids []string
	for _, ev := range m1.Events() {
		if ev.Kind == "started" {
			pids = append(pids, ev.Attrs["pid"])
		}
	}
	proc.Emit("before-crash", "simulators", strings.Join(pids, ","))

	fmt.Fprintln(out, "\nthe manager is SIGKILLed")
	if err := m1.Signal(syscall.SIGKILL); err != nil {
		return false, err
	}
	if _, err := m1.Wait(ctx, waitLong); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "while it is down, a user kills %s and pauses %s\n", killed.Name, paused.Name)
	if err := signalSim(w, killed.UUID, syscall.SIGKILL); err != nil {
		return false, err
	}
	if err := signalSim(w, paused.UUID, syscall.SIGUSR1); err != nil {
		return false, err
	}
	if err := waitFor(ctx, func() bool {
		s, _ := w.state(paused.UUID)
		return !w.alive(killed.UUID) && s == "paused"
	}); err != nil {
		return false, err
	}

	fmt.Fprintln(out, "\na new manager starts, with the same manager UUID and nothing in memory")
	mcfg.Create = nil
	m2, err := g.Start("manager-2", "manager", mcfg)
	if err != nil {
		return false, err
	}
	if _, err := m2.Await(ctx, "ready", nil, waitLong); err != nil {
		return false, err
	}
	after := views(m2.Events())
	printView(out, "after recovery", after)

	fmt.Fprintln(out, "\nthe platform moves the manager: SIGTERM")
	if err := m2.Signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	exit2, err := m2.Wait(ctx, waitLong)
	if err != nil {
		return false, err
	}

	// What the moved manager left in the store, read while no manager
	// runs (a bolt file has one user at a time).
	st, closeStore, err := cfg.Open()
	if err != nil {
		return false, err
	}
	records := map[string]storage.Record{}
	for _, sim := range sims {
		if rec, err := st.Get(ctx, sim.UUID); err == nil {
			records[sim.UUID] = rec
		}
	}
	closeStore()
	relocated := func(sim label, from string) bool {
		rec := records[sim.UUID]
		return rec.Status == "relocating" && rec.Previous == from
	}

	fmt.Fprintln(out, "\na third manager starts and resumes what the second one relocated")
	m3, err := g.Start("manager-3", "manager", mcfg)
	if err != nil {
		return false, err
	}
	if _, err := m3.Await(ctx, "ready", nil, waitLong); err != nil {
		return false, err
	}
	resumed := views(m3.Events())
	printView(out, "after the relocation", resumed)
	if err := m3.Signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	if _, err := m3.Wait(ctx, waitLong); err != nil {
		return false, err
	}

	// Check the outcome against the world and the store.
	st, closeStore, err = cfg.Open()
	if err != nil {
		return false, err
	}
	defer closeStore()
	statusOf := func(uuid string) string {
		rec, err := st.Get(ctx, uuid)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return rec.Status
	}
	took := func(c *proc.Child, sim label, decision, from, to string) bool {
		return slices.ContainsFunc(c.Events(), func(ev proc.Event) bool {
			return ev.Has("take-over", map[string]string{"uuid": sim.UUID, "decision": decision, "from": from, "to": to})
		})
	}
	lost := func(c *proc.Child, sim label) bool {
		return slices.ContainsFunc(c.Events(), func(ev proc.Event) bool { return ev.Has("lost", map[string]string{"uuid": sim.UUID}) })
	}
	checks := []struct {
		ok   bool
		what string
	}{
		{len(before) == 3, "the first manager saw all three running"},
		{after[survivor.UUID] == "running", survivor.Name + " adopted with its UUID, running"},
		{after[paused.UUID] == "paused", paused.Name + " adopted with its UUID, paused as the user left it"},
		{after[killed.UUID] == "", killed.Name + " is not in the new view"},
		{statusOf(killed.UUID) == "gone", killed.Name + " is marked gone in the store"},
		{lost(m2, killed), "the adoption pass reported " + killed.Name + " lost"},
		{took(m2, survivor, "resume", "running", "running"), "the second manager resumed " + survivor.Name + " after the crash (an unexpected restart, within budget)"},
		{exit2.Code == recovery.DefaultRelocateExitCode, fmt.Sprintf("the moved manager exited %d so its platform replaces it (got %d)", recovery.DefaultRelocateExitCode, exit2.Code)},
		{relocated(survivor, "running") && relocated(paused, "paused"),
			fmt.Sprintf("the moved manager left both simulators relocating, remembering running and paused (%s %s←%s, %s %s←%s)",
				survivor.Name, records[survivor.UUID].Status, records[survivor.UUID].Previous, paused.Name, records[paused.UUID].Status, records[paused.UUID].Previous)},
		{took(m3, paused, "resume", "relocating", "paused") && took(m3, survivor, "resume", "relocating", "running"), "the third manager resumed each where it was relocated from"},
		{resumed[survivor.UUID] == "running" && resumed[paused.UUID] == "paused", "the third manager's view agrees with the world"},
	}
	passed := true
	fmt.Fprintln(out)
	for _, c := range checks {
		verdict := "PASS"
		if !c.ok {
			verdict, passed = "FAIL", false
		}
		fmt.Fprintf(out, "%s %s\n", verdict, c.what)
	}
	if !passed {
		// Who wrote what, and why: the records' audit trails.
		for _, sim := range sims {
			rec, err := st.Get(ctx, sim.UUID)
			if err != nil {
				fmt.Fprintf(out, "\n%s: %v\n", sim.Name, err)
				continue
			}
			fmt.Fprintf(out, "\naudit trail of %s:\n", sim.Name)
			for _, e := range rec.History.All() {
				fmt.Fprintf(out, "  %s  rev %-4d %-18s %-9s → %-9s %s\n", e.At.Format("15:04:05.000000"), e.Revision, e.Actor, e.From, e.To, e.Reason)
			}
		}
	}
	return passed, nil
}

// views parses a manager's "view NAME UUID STATE ..." lines by UUID.
// views returns the state of each simulator a manager's view holds, by
// UUID, from the view events it reported.
func views(events []proc.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range events {
		if ev.Kind == "view" {
			out[ev.Attrs["uuid"]] = ev.Attrs["state"]
		}
	}
	return out
}

func printView(out io.Writer, title string, v map[string]string) {
	fmt.Fprintf(out, "  view %s:\n", title)
	ids := make([]string, 0, len(v))
	for id := range v {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(out, "    %s  %s\n", id, v[id])
	}
}

func signalSim(w world, uuid string, sig syscall.Signal) error {
	data, err := os.ReadFile(w.path(uuid, ".json"))
	if err != nil {
		return err
	}
	var l label
	if err := json.Unmarshal(data, &l); err != nil {
		return err
	}
	return syscall.Kill(l.PID, sig)
}

func waitFor(ctx context.Context, cond func() bool) error {
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for the world")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

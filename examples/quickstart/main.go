// Quickstart is the smallest tour of execfsm.
//
// It prints the execution lifecycle table, then walks one execution
// through its life the way a cluster master and two execution
// controllers would, each controller on the startup and SIGTERM path the
// README shows: the master schedules it; controller pod-a starts, takes
// ownership and runs it; pod-b, started too early, is refused while pod-a
// lives; a user pauses the execution; the platform drains pod-a's node,
// so pod-a marks it relocating instead of shutting it down and lets go of
// it; pod-b starts, takes it over at the next epoch and brings it back
// paused, as it was; pod-a, still alive, tries to write and is fenced;
// the execution completes. Every change is printed with who made it
// (owner@epoch), and the audit trail at the end.
//
//	go run ./examples/quickstart                # in memory
//	go run ./examples/quickstart -store bolt    # a bbolt file in a temp dir
//	go run ./examples/quickstart -store etcd    # an etcd started in-process
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

func main() {
	var f stores.Flags
	f.Register(flag.CommandLine, "memory")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, f); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// slicer is the execution's work; it can be picked up by a new controller.
type slicer struct{}

func (slicer) IsRestartable() bool { return true }

func run(ctx context.Context, w io.Writer, f stores.Flags) error {
	store, closeStore, err := f.Open()
	if err != nil {
		return err
	}
	defer closeStore()
	table := teraslice.Lifecycle()
	printTable(w, table)
	fmt.Fprintf(w, "\nStore: %s\n", f.Kind)

	logChange := func(c transition.Change[state.Status]) {
		who := c.Actor
		if c.Owner != "" {
			who = fmt.Sprintf("%s@%d", c.Owner, c.Epoch)
		}
		if c.Changed() {
			fmt.Fprintf(w, "  rev %-3d %-10s %-12s → %-12s %s\n", c.Revision, who, c.From, c.To, c.Reason)
		} else {
			fmt.Fprintf(w, "  rev %-3d %-10s %-12s   (owner)      %s\n", c.Revision, who, c.From, c.Reason)
		}
	}
	open := func(actor string) (*transition.Persisted[state.Status], error) {
		return transition.NewPersisted(table, store, "ex-42", transition.PersistedOptions{Actor: actor}, transition.Observers[state.Status]{OnChange: []func(transition.Change[state.Status]){logChange}})
	}
	// Each controller's policy: the platform restarts controllers and the
	// work can move, so SIGTERM relocates. Its lease is how long a
	// successor waits if it dies without letting go.
	decider, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{}, Failovers: teraslice.Failovers})
	if err != nil {
		return err
	}
	lease := func(pod string) storage.Lease { return storage.Lease{Holder: pod, TTL: 15 * time.Second} }

	master, err := open("master")
	if err != nil {
		return err
	}
	// The table, beside the records: the operator's CLI reads it.
	if _, err := schema.Save(ctx, master.Store(), "teraslice", teraslice.Roles()); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nOne execution, start to finish:")
	// The master validated the job: it records that its work can move,
	// for operators and for a controller that cannot ask its work yet.
	submitted := transition.To(state.Pending).Because("job submitted").Set(recovery.MetaRelocatable, "true")
	if _, err := master.Create(ctx, submitted); err != nil {
		return err
	}
	if err := fire(ctx, master, state.Scheduling, "allocator dequeued it"); err != nil {
		return err
	}
	if err := fire(ctx, master, state.Initializing, "controller pod placed"); err != nil {
		return err
	}

	// pod-a starts: it takes the execution over and decides what to do.
	podA, err := open("pod-a")
	if err != nil {
		return err
	}
	verdict, err := decider.Start(ctx, podA, lease("pod-a"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  pod-a startup: %s (%s)\n", verdict.Decision, verdict.Reason)
	if err := fire(ctx, podA, state.Running, "slicer ready, workers connected"); err != nil {
		return err
	}

	// pod-b is started by mistake while pod-a lives: refused, nothing written.
	podB, err := open("pod-b")
	if err != nil {
		return err
	}
	if _, err = decider.Start(ctx, podB, lease("pod-b")); !errors.Is(err, storage.ErrHeld) {
		return fmt.Errorf("expected pod-b to be refused while pod-a lives, got %v", err)
	}
	fmt.Fprintf(w, "  pod-b startup refused: %v\n", err)

	if err := fire(ctx, master, state.Paused, "user paused the execution"); err != nil {
		return err
	}

	// The node is drained: SIGTERM, and the status is not stopping.
	action, err := decider.Terminate(ctx, podA, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  pod-a SIGTERM: %s, exit %d (%s)\n", action.Kind, action.ExitCode, action.Reason)

	// pod-b starts elsewhere and takes over at once: pod-a let go.
	verdict, err = decider.Start(ctx, podB, lease("pod-b"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  pod-b startup: %s → %s (%s)\n", verdict.Decision, verdict.To, verdict.Reason)

	// pod-a has not exited yet and tries to carry on: fenced.
	_, err = podA.Fire(ctx, state.Running, "old pod still alive")
	if !errors.Is(err, storage.ErrFenced) {
		return fmt.Errorf("expected pod-a to be fenced, got %v", err)
	}
	fmt.Fprintf(w, "  pod-a refused: %v\n", err)

	if err := fire(ctx, master, state.Running, "user resumed the execution"); err != nil {
		return err
	}
	// The work ends: End decides the final status, Decider.End writes it
	// with the work's statistics and lets the execution go.
	end, err := decider.End(ctx, podB, recovery.Ending{Finished: true}, map[string]string{"slices": "100"})
	if err != nil {
		return err
	}
	if end.ReleaseErr != nil {
		return end.ReleaseErr
	}
	fmt.Fprintf(w, "  pod-b finished: %s → %s (%s)\n", end.From, end.To, end.Reason)
	if _, err := master.Fire(ctx, state.Running, "restart?"); !errors.Is(err, transition.ErrNotAllowed) {
		return fmt.Errorf("completed must be final, got %v", err)
	}

	_, rec, err := master.Load(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nFinal record: %s, owner %s at epoch %d, revision %d; audit trail:\n", rec.Status, rec.Owner, rec.Epoch, rec.Revision)
	for _, e := range rec.History.All() {
		from := e.From
		if from == "" {
			from = "(created)"
		}
		owner := ""
		if e.Owner != "" {
			owner = fmt.Sprintf("%s@%d", e.Owner, e.Epoch)
		}
		fmt.Fprintf(w, "  %-12s → %-12s by %-7s %-9s %s\n", from, e.To, e.Actor, owner, e.Reason)
	}
	return nil
}

func fire(ctx context.Context, p *transition.Persisted[state.Status], to state.Status, reason string) error {
	_, err := p.Fire(ctx, to, reason)
	return err
}

func printTable(w io.Writer, table *transition.Table[state.Status]) {
	fmt.Fprintln(w, "The execution lifecycle (← marks a return to the status relocating left):")
	for _, s := range table.States() {
		kind := "running"
		switch {
		case s.IsInit():
			kind = "init"
		case s.IsTerminal():
			kind = "terminal"
		}
		var next []string
		for _, n := range table.Next(s) {
			if table.IsReturn(s, n) {
				next = append(next, "←"+n.String())
			} else {
				next = append(next, n.String())
			}
		}
		if len(next) == 0 {
			next = []string{"(final)"}
		}
		fmt.Fprintf(w, "  %-12s %-8s → %s\n", s, kind, strings.Join(next, " "))
	}
}

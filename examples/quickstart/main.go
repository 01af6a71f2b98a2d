// Quickstart is the smallest tour of execfsm, entirely in memory.
//
// It prints the execution lifecycle table, then walks one execution
// through its life the way a cluster master and two execution
// controllers would: the master schedules it, controller pod-a takes it
// over and runs it, a user pauses it, the platform drains pod-a's node
// (so pod-a marks it relocating instead of shutting it down), pod-b takes
// it over and brings it back paused, as it was, and finally completes it.
// When pod-a, still alive, tries to write, it is fenced out. Every change
// is printed with its reason, and the audit trail at the end.
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

	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/state"
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

func run(ctx context.Context, w io.Writer, f stores.Flags) error {
	store, closeStore, err := f.Open()
	if err != nil {
		return err
	}
	defer closeStore()
	table := state.Lifecycle()
	printTable(w, table)
	fmt.Fprintf(w, "\nStore: %s\n", f.Kind)

	logChange := transition.OnChange(func(c transition.Change[state.Status]) {
		who := c.Actor
		if c.Owner != "" {
			who = fmt.Sprintf("%s@%d", c.Owner, c.Epoch)
		}
		if c.Changed() {
			fmt.Fprintf(w, "  rev %-2d %-12s %-12s → %-12s %s\n", c.Revision, who, c.From, c.To, c.Reason)
		} else {
			fmt.Fprintf(w, "  rev %-2d %-12s %-12s   (owner)      %s\n", c.Revision, who, c.From, c.Reason)
		}
	})
	open := func(actor string) (*transition.Persisted[state.Status], error) {
		return transition.NewPersisted(table, store, "ex-42", transition.Actor(actor), logChange)
	}
	master, err := open("master")
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "\nOne execution, start to finish:")
	if _, err := master.Create(ctx, transition.Update[state.Status]{To: state.Pending, Reason: "job submitted"}); err != nil {
		return err
	}
	if err := fire(ctx, master, state.Scheduling, "allocator dequeued it"); err != nil {
		return err
	}
	if err := fire(ctx, master, state.Initializing, "controller pod placed"); err != nil {
		return err
	}

	podA, err := open("pod-a")
	if err != nil {
		return err
	}
	if podA, _, err = podA.Acquire(ctx, "pod-a", "controller started"); err != nil {
		return err
	}
	for _, step := range []struct {
		p      *transition.Persisted[state.Status]
		to     state.Status
		reason string
	}{
		{podA, state.Running, "slicer ready, workers connected"},
		{master, state.Paused, "user paused the execution"},
		{podA, state.Relocating, "SIGTERM, status not stopping: node drain, relocate"},
	} {
		if err := fire(ctx, step.p, step.to, step.reason); err != nil {
			return err
		}
	}

	// pod-b starts elsewhere, finds relocating and takes over.
	podB, err := open("pod-b")
	if err != nil {
		return err
	}
	_, rec, err := podB.Load(ctx)
	if err != nil {
		return err
	}
	back, err := table.Parse(rec.Previous)
	if err != nil {
		return err
	}
	if podB, _, err = podB.Acquire(ctx, "pod-b", "relocated controller took over"); err != nil {
		return err
	}
	if err := fire(ctx, podB, back, "resumed where it was relocated from"); err != nil {
		return err
	}

	// pod-a has not exited yet and tries to carry on: fenced.
	_, err = podA.Fire(ctx, state.Running, "old pod still alive")
	if !errors.Is(err, transition.ErrFenced) {
		return fmt.Errorf("expected pod-a to be fenced, got %v", err)
	}
	fmt.Fprintf(w, "  pod-a refused: %v\n", err)

	for _, step := range []struct {
		to     state.Status
		reason string
	}{
		{state.Running, "user resumed the execution"},
		{state.Completed, "all slices processed"},
	} {
		p := podB
		if step.to == state.Running {
			p = master
		}
		if err := fire(ctx, p, step.to, step.reason); err != nil {
			return err
		}
	}
	if _, err := podB.Fire(ctx, state.Running, "restart?"); !errors.Is(err, transition.ErrNotAllowed) {
		return fmt.Errorf("completed must be final, got %v", err)
	}

	_, rec, err = master.Load(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nFinal record: %s, owner %s at epoch %d, revision %d; audit trail:\n", rec.Status, rec.Owner, rec.Epoch, rec.Revision)
	for _, e := range rec.History {
		from := e.From
		if from == "" {
			from = "(created)"
		}
		fmt.Fprintf(w, "  %-12s → %-12s by %-7s %s\n", from, e.To, e.Actor, e.Reason)
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

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// An operator lists what a stopped controller's bbolt file holds and asks
// an execution to stop, as `execfsm --bolt state.db list` and
// `execfsm --bolt state.db stop ex-1 --reason "user asked"` would.
func Example() {
	dir, err := os.MkdirTemp("", "execfsm-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")

	// What a controller left behind.
	db, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := db.Store("executions")
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{
		Actor: "cluster-master", Clock: func() time.Time { return at },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := exec.Create(context.Background(), transition.To(state.Pending).Because("submitted")); err != nil {
		fmt.Println(err)
		return
	}
	// It recorded its table, so tools know which status stops an
	// execution.
	if _, err := schema.Save(context.Background(), store, "teraslice", teraslice.Roles()); err != nil {
		fmt.Println(err)
		return
	}
	_ = db.Close()

	ctx := context.Background()
	run(ctx, []string{"--bolt", path, "list"}, os.Stdout, os.Stderr)
	code := run(ctx, []string{"--bolt", path, "stop", "ex-1", "--reason", "user asked", "--actor", "operator:ana"}, os.Stdout, os.Stderr)
	fmt.Println("exit status", code)
	// Output:
	// ID    STATUS   SINCE                 OWNER  REVISION  REASON
	// ex-1  pending  2026-12-03T12:00:00Z  -      1         submitted
	// ex-1: pending → stopping at revision 3, by operator:ana: user asked
	// exit status 0
}

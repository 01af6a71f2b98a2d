package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
)

// managerConfig is what the supervisor tells a controller-manager.
type managerConfig struct {
	Store  stores.Config `json:"store"`
	World  string        `json:"world"`  // a file per Job: its spec and its pods (the fake kubelet's)
	Holder string        `json:"holder"` // this manager, as the owner of the Jobs it drives
	TTL    time.Duration `json:"ttl"`    // of its lease, the one all its Jobs are held under
}

// leaderID is the record the managers elect their leader on: the one
// whose ownership is the lease every Job is held under.
const leaderID = "controller-manager"

// world is what the fake kubelet keeps of a Job: its spec and its pods.
type world struct {
	Spec Spec `json:"spec"`
	Pods Pods `json:"pods"`
}

// runManager is one life of a Volcano controller-manager: run.Manage
// elects it leader, takes every Job over under its one lease, syncs each
// with its pods through the state machine, and on SIGTERM hands every
// Job over and exits 0.
func runManager(raw json.RawMessage) int {
	var cfg managerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	store, closeStore, err := cfg.Store.Open()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer closeStore()
	decide, err := recovery.NewDecider(volcano.Roles(), recovery.Policy{Manager: true})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	m := Manager{Roles: volcano.Roles(), Decide: decide}
	code, err := run.Manage(context.Background(), run.ManagerConfig[Phase]{
		Roles: volcano.Roles(), Store: store, Holder: cfg.Holder, Leader: leaderID, TTL: cfg.TTL, HandOver: true,
		Resync: 500 * time.Millisecond, Workers: 2,
		World: func(context.Context) ([]reconcile.Item[string], error) { return jobsIn(cfg.World) },
		Sync: func(ctx context.Context, exec *transition.Persisted[Phase], phase Phase) (run.Step, error) {
			w, err := readWorld(cfg.World, exec.ID())
			if err != nil {
				return run.Step{}, err
			}
			after, err := m.Execute(ctx, exec, SyncJob, w.Spec, w.Pods)
			if err == nil && after != phase {
				fmt.Printf("sync %s %s -> %s\n", exec.ID(), phase, after)
			}
			return run.Step{}, err
		},
		Ready: func(driven int) {
			fmt.Printf("ready %s drives %d jobs\n", cfg.Holder, driven)
			proc.Emit("ready", "adopted", fmt.Sprint(driven))
		},
		Logger: slog.New(slog.NewTextHandler(os.Stdout, nil)),
	})
	if err != nil {
		fmt.Println("error", err)
	}
	return code
}

// jobsIn is the world's Jobs: the fake kubelet's files.
func jobsIn(dir string) ([]reconcile.Item[string], error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var items []reconcile.Item[string]
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			items = append(items, reconcile.Item[string]{Key: id})
		}
	}
	return items, nil
}

// readWorld is what the fake kubelet reports of Job id.
func readWorld(dir, id string) (world, error) {
	var w world
	data, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		return w, err
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return w, reconcile.TerminalError(err)
	}
	return w, nil
}

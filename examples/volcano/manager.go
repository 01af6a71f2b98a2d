package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
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

// controllerManager is one life of a Volcano controller-manager in
// execfsm's manager mode: it drives every Job of the store, none of which
// runs in its process.
type controllerManager struct {
	cfg    managerConfig
	table  *transition.Table[Phase]
	m      Manager
	store  storage.Store
	leader storage.Ownership // the lease all its Jobs are held under
	mu     sync.Mutex
	driven map[string]*transition.Persisted[Phase]
}

func runManager(raw json.RawMessage) int {
	var cfg managerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	store, closeStore, err := cfg.Store.Open()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer closeStore()
	table, roles := volcano.Lifecycle(), volcano.Roles()
	decide, err := recovery.NewDecider(roles, recovery.Policy{Manager: true})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// One lease for all the Jobs it drives, as a leader-elected
	// controller-manager holds: the leader record's. A manager whose
	// predecessor died waits for that lease to expire, once.
	leader, _, err := store.Acquire(ctx, leaderID, storage.Lease{Holder: cfg.Holder, TTL: cfg.TTL, Wait: true, Reason: "elected"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	cm := &controllerManager{cfg: cfg, table: table, m: Manager{Roles: roles, Decide: decide}, store: store,
		leader: leader, driven: map[string]*transition.Persisted[Phase]{}}
	if err := cm.run(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return cm.handOver()
}

// run adopts every Job through a reconcile.Loop, syncs each, says it is
// ready and drives them until SIGTERM.
func (cm *controllerManager) run(ctx context.Context) error {
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Reconciler: cm, Adopter: cm, World: cm.list, Known: cm.known,
		Resync: 500 * time.Millisecond, AdoptWorkers: 4, Workers: 2,
	})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	if err := loop.Idle(ctx); err != nil {
		<-done
		if ctx.Err() != nil {
			return nil // told to go before it was ready
		}
		return err
	}
	cm.mu.Lock()
	adopted := len(cm.driven)
	cm.mu.Unlock()
	fmt.Printf("ready %s drives %d jobs\n", cm.cfg.Holder, adopted)
	proc.Emit("ready", "adopted", fmt.Sprint(adopted))
	err = <-done
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// known are the Jobs of the store: its records but the leader's.
func (cm *controllerManager) known(ctx context.Context) ([]string, error) {
	ids, err := reconcile.StoreKeys(cm.store.(storage.Lister))(ctx)
	return slices.DeleteFunc(ids, func(id string) bool { return id == leaderID }), err
}

// list is the world's Jobs: the fake kubelet's files.
func (cm *controllerManager) list(context.Context) ([]reconcile.Item[string], error) {
	entries, err := os.ReadDir(cm.cfg.World)
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

// Adopt takes a Job over under the manager's lease: a manager's start,
// deciding on the Job as it finds it. A Job handed over by the last
// manager is free, and so is one whose manager's lease has expired.
func (cm *controllerManager) Adopt(ctx context.Context, item reconcile.Item[string]) error {
	exec, err := transition.NewPersisted(cm.table, cm.store, item.Key, transition.PersistedOptions{Actor: cm.cfg.Holder})
	if err != nil {
		return err
	}
	v, err := cm.m.Decide.Start(ctx, exec, storage.Lease{Holder: cm.cfg.Holder, Under: cm.leader,
		Reason: "controller-manager took the job over"})
	switch {
	case errors.Is(err, recovery.ErrTerminalStatus):
		fmt.Printf("adopt %s %s %s\n", item.Key, v.From, v.Decision)
		proc.Emit("adopt", "id", item.Key, "phase", string(v.From), "decision", v.Decision.String())
		return nil // ended: nothing to drive
	case err != nil:
		fmt.Printf("error adopting %s: %v\n", item.Key, err)
		proc.Emit("adopt-error", "id", item.Key, "error", err.Error())
		return err
	}
	cm.mu.Lock()
	cm.driven[item.Key] = exec
	cm.mu.Unlock()
	fmt.Printf("adopt %s %s %s\n", item.Key, v.To, v.Decision)
	proc.Emit("adopt", "id", item.Key, "phase", string(v.To), "decision", v.Decision.String())
	return nil
}

// Reconcile syncs a Job the manager drives with its pods.
func (cm *controllerManager) Reconcile(ctx context.Context, id string) (reconcile.Result, error) {
	cm.mu.Lock()
	exec, ok := cm.driven[id]
	cm.mu.Unlock()
	if !ok {
		return reconcile.Result{}, nil
	}
	data, err := os.ReadFile(filepath.Join(cm.cfg.World, id+".json"))
	if err != nil {
		return reconcile.Result{}, err
	}
	var w world
	if err := json.Unmarshal(data, &w); err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	before, _, err := exec.Load(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	after, err := cm.m.Execute(ctx, exec, SyncJob, w.Spec, w.Pods)
	if err != nil {
		return reconcile.Result{}, err
	}
	if after != before {
		fmt.Printf("sync %s %s -> %s\n", id, before, after)
	}
	return reconcile.Result{}, nil
}

// handOver is the manager's SIGTERM: every Job it drives stays as it is,
// its ownership released for the next manager, then the leader's lease;
// then it exits 0.
func (cm *controllerManager) handOver() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm.mu.Lock()
	defer cm.mu.Unlock()
	ids := make([]string, 0, len(cm.driven))
	for id := range cm.driven {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	code := 0
	for _, id := range ids {
		a, err := cm.m.Decide.Terminate(ctx, cm.driven[id], nil)
		switch {
		case err != nil:
			fmt.Printf("error handing %s over: %v\n", id, err)
			code = 1
		case a.ReleaseErr != nil:
			fmt.Printf("error releasing %s: %v\n", id, a.ReleaseErr)
			code = 1
		default:
			fmt.Printf("%s %s\n", a.Kind, id)
			code = max(code, a.ExitCode)
		}
	}
	if err := cm.leader.Release(ctx); err != nil {
		fmt.Printf("error releasing the leader's lease: %v\n", err)
		code = 1
	}
	proc.Emit("handed-over", "jobs", fmt.Sprint(len(ids)))
	return code
}

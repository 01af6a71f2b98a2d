package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// controllerConfig is what the operator tells the controller it starts.
type controllerConfig struct {
	Dir string `json:"dir"` // where its bbolt file is
	// Password is the operator's: the controller lets writes through its
	// admin handler only with it. (An environment variable carries it
	// to the child: never a command-line argument, which every user of
	// the machine can read.)
	Password string `json:"password"`
}

// operatorUser is who may write through the admin handler.
const operatorUser = "operator"

// podName is the controller's name in the audit trails.
const podName = "ctl-1"

// The executions the controller runs, and what becomes of each: a
// variety, so that the page has something in most statuses.
var executions = []struct {
	id   string
	ends string // "completed", "failed", "running" (runs until stopped or moved), "pending" (never started)
}{
	{"ex-1", "completed"},
	{"ex-2", "running"},
	{"ex-3", "running"},
	{"ex-4", "failed"},
	{"ex-5", "pending"},
	{"ex-6", "running"},
}

// controller is one process holding the bbolt file and driving its
// executions; the admin handler is the only way in while it runs.
type controller struct {
	store   storage.Store
	decider *recovery.Decider[state.Status]

	mu    sync.Mutex
	owned map[string]*transition.Persisted[state.Status] // the executions it drives
}

// runController is the child: it opens the file, runs the executions,
// serves /admin/ and, on SIGTERM, lets each running execution relocate.
func runController(raw json.RawMessage) int {
	var cfg controllerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	code, err := control(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	return code
}

// control runs the controller until SIGTERM, and returns its exit
// status: the relocation's when executions relocate.
func control(ctx context.Context, cfg controllerConfig) (int, error) {
	db, err := boltstore.Open(filepath.Join(cfg.Dir, "state.db"), boltstore.Options{})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	store, err := db.Store("executions")
	if err != nil {
		return 0, err
	}
	// Record the table first: the handler, the CLI and the next version
	// of this controller read it from the store.
	if _, err := schema.Save(ctx, store, "teraslice", teraslice.Roles()); err != nil {
		return 0, err
	}
	decider, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers})
	if err != nil {
		return 0, err
	}
	c := &controller{store: store, decider: decider, owned: map[string]*transition.Persisted[state.Status]{}}

	// The handler is told which table this controller decides with, so
	// that it refuses a stop this controller would not act on and its
	// pages say which version it serves.
	serves, err := schema.Describe("teraslice", teraslice.Roles())
	if err != nil {
		return 0, err
	}
	h, err := admin.NewHandler(store, admin.HandlerOptions{Path: "/admin/", Authorize: authorizer(cfg.Password), Serves: serves})
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", h)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	url := fmt.Sprintf("http://%s/admin/", listener.Addr())
	fmt.Println("admin", url)
	proc.Emit("admin", "url", url)

	for _, e := range executions {
		if err := c.run(ctx, e.id, e.ends); err != nil {
			return 0, fmt.Errorf("%s: %w", e.id, err)
		}
	}
	// An operator's stop arrives as a write to the store: the handler's,
	// in this same process. The controller sees it as a watch event and
	// shuts that execution down, as Teraslice's controller does when the
	// cluster master writes stopping.
	events, err := reconcile.StoreEvents(ctx, store, reconcile.StoreEventsOptions{SkipWritesBy: podName})
	if err != nil {
		return 0, err
	}
	fmt.Println("ready")
	proc.Emit("ready")
	for id := range events {
		if err := c.onChange(ctx, id); err != nil {
			fmt.Fprintf(os.Stderr, "controller: %s: %v\n", id, err)
		}
	}

	// SIGTERM: the platform moves this controller. End the watches, then
	// let each running execution relocate, as recovery.Terminate says.
	h.Close()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdown); err != nil {
		return 0, err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return 0, err
	}
	return c.terminate(shutdown)
}

// authorizer lets anyone read and the operator write, as itself.
func authorizer(password string) admin.Authorizer {
	return func(r *http.Request, a admin.Operation) (string, error) {
		if !a.Verb.Writes() {
			return "", nil
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			return "", fmt.Errorf("%w: writes need the operator's password", admin.ErrUnauthenticated)
		}
		if user != operatorUser || subtle.ConstantTimeCompare([]byte(pass), []byte(password)) != 1 {
			return "", errors.New("only the operator may write")
		}
		return "operator:" + user, nil
	}
}

// run creates an execution as the cluster master would, then, as its
// controller, starts it and takes it where ends says.
func (c *controller) run(ctx context.Context, id, ends string) error {
	master, err := transition.NewPersisted(teraslice.Lifecycle(), c.store, id, transition.PersistedOptions{Actor: "cluster-master"})
	if err != nil {
		return err
	}
	if _, err := master.Create(ctx, transition.To(state.Pending).Because("submitted")); err != nil {
		return err
	}
	if ends == "pending" {
		return nil // waiting for workers: nobody starts it
	}
	if _, err := master.Walk(ctx, state.Initializing, "controller placed"); err != nil {
		return err
	}
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), c.store, id, transition.PersistedOptions{Actor: podName})
	if err != nil {
		return err
	}
	if _, err := c.decider.Start(ctx, exec, storage.Lease{Holder: podName, TTL: 30 * time.Second}); err != nil {
		return err
	}
	if _, err := exec.Walk(ctx, state.Running, "workers connected"); err != nil {
		return err
	}
	var ending recovery.Ending
	switch ends {
	case "running":
		c.mu.Lock()
		c.owned[id] = exec
		c.mu.Unlock()
		return nil
	case "completed":
		ending = recovery.Ending{Finished: true}
	case "failed":
		ending = recovery.Ending{Err: errors.New("slicer: reader failed: index logs-2026.12 not found")}
	}
	_, err = c.decider.End(ctx, exec, ending, nil)
	return err
}

// onChange looks at a record someone else wrote: a stop of an execution
// this controller drives shuts it down.
func (c *controller) onChange(ctx context.Context, id string) error {
	c.mu.Lock()
	exec := c.owned[id]
	c.mu.Unlock()
	if exec == nil {
		return nil
	}
	rec, err := c.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if rec.Status != state.Stopping.String() {
		return nil
	}
	// Shut the workers down, then write what the stop earned.
	end, err := c.decider.End(ctx, exec, recovery.Ending{Finished: false}, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.owned, id)
	c.mu.Unlock()
	fmt.Printf("%s: %s → %s (%s)\n", id, end.From, end.To, end.Reason)
	proc.Emit("ended", "id", id, "status", end.To.String())
	return nil
}

// terminate lets each execution the controller still drives relocate,
// and returns the exit status the decisions ask for.
func (c *controller) terminate(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code := 0
	for id, exec := range c.owned {
		action, err := c.decider.Terminate(ctx, exec, nil)
		if err != nil {
			return 1, fmt.Errorf("%s: %w", id, err)
		}
		fmt.Printf("%s: SIGTERM: %s\n", id, action.Kind)
		code = max(code, action.ExitCode)
	}
	return code, nil
}

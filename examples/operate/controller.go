package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
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

// runController is the child: it opens the file, creates the executions
// as the cluster master would, serves /admin/, and drives them with
// run.Manage until SIGTERM, when each running execution relocates.
func runController(raw json.RawMessage) int {
	var cfg controllerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}
	code, err := control(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
	}
	return code
}

// control runs the controller until SIGTERM, and returns its exit
// status: the relocation's when executions relocate.
func control(ctx context.Context, cfg controllerConfig) (int, error) {
	db, err := boltstore.Open(filepath.Join(cfg.Dir, "state.db"), boltstore.Options{})
	if err != nil {
		return 1, err
	}
	defer db.Close()
	store, err := db.Store("executions")
	if err != nil {
		return 1, err
	}
	plans := map[string]string{}
	for _, e := range executions {
		if err := submit(ctx, store, e.id, e.ends); err != nil {
			return 1, fmt.Errorf("%s: %w", e.id, err)
		}
		plans[e.id] = e.ends
	}

	// The handler is told which table this controller decides with, so
	// that it refuses a stop this controller would not act on and its
	// pages say which version it serves.
	serves, err := schema.Describe("teraslice", teraslice.Roles())
	if err != nil {
		return 1, err
	}
	h, err := admin.NewHandler(store, admin.HandlerOptions{Path: "/admin/", Authorize: authorizer(cfg.Password), Serves: serves})
	if err != nil {
		return 1, err
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/admin/", h)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1, err
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go server.Serve(listener)
	defer server.Close()
	url := fmt.Sprintf("http://%s/admin/", listener.Addr())
	fmt.Println("admin", url)
	proc.Emit("admin", "url", url)

	// An operator's stop arrives as a write to the store, the handler's:
	// the manager watches the store and syncs the execution at once.
	return run.Manage(ctx, run.ManagerConfig[state.Status]{
		Roles: teraslice.Roles(), Store: store, Table: "teraslice", Holder: podName, TTL: 30 * time.Second,
		Platform: recovery.KubernetesJob, Resumable: true, Failovers: teraslice.Failovers,
		Sync: func(ctx context.Context, exec *transition.Persisted[state.Status], s state.Status) (run.Step, error) {
			return follow(ctx, exec, s, plans[exec.ID()])
		},
		Ready:  func(int) { fmt.Println("ready"); proc.Emit("ready") },
		Logger: slog.New(slog.NewTextHandler(os.Stdout, nil)),
	})
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

// submit creates an execution as the cluster master would and, unless it
// waits for workers, places its controller.
func submit(ctx context.Context, store storage.Store, id, ends string) error {
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "cluster-master"})
	if err != nil {
		return err
	}
	if _, err := master.Create(ctx, transition.To(state.Pending).Because("submitted")); err != nil {
		return err
	}
	if ends == "pending" {
		return nil // waiting for workers: nobody starts it
	}
	_, err = master.Walk(ctx, state.Initializing, "controller placed")
	return err
}

// follow takes an execution where its plan says: set up, then completed,
// failed, or running until it is stopped or moved.
func follow(ctx context.Context, exec *transition.Persisted[state.Status], s state.Status, plan string) (run.Step, error) {
	switch {
	case s == state.Initializing:
		_, err := exec.Walk(ctx, state.Running, "workers connected")
		return run.Step{}, err
	case s == state.Stopping: // an operator's stop: shut the workers down, then write what it earned
		return run.End(recovery.Ending{}), nil
	case s == state.Running && plan == "completed":
		return run.End(recovery.Ending{Finished: true}), nil
	case s == state.Running && plan == "failed":
		return run.End(recovery.Ending{Err: errors.New("slicer: reader failed: index logs-2026.12 not found")}), nil
	}
	return run.Step{}, nil // running until stopped or moved; pending until workers come
}

package admin_test

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// A controller mounts the handler beside its metrics; an operator's tool
// (or `execfsm --http URL`) stops an execution through it. Only the
// user the authorizer knows may write, and the trail names that user.
func Example() {
	ctx := context.Background()
	store := storage.NewMemory() // a controller's store: bbolt, etcd, Kubernetes
	if _, err := schema.Save(ctx, store, "teraslice", teraslice.Roles()); err != nil {
		log.Fatal(err)
	}
	exec, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	if _, err := exec.Create(ctx, transition.To(state.Pending)); err != nil {
		log.Fatal(err)
	}
	if _, err := exec.Walk(ctx, state.Running, "scheduled"); err != nil {
		log.Fatal(err)
	}

	// Reads are open; a write needs ops's password, and is written as
	// "operator:ops" whatever the client calls itself.
	authorize := func(r *http.Request, a admin.Operation) (string, error) {
		if !a.Verb.Writes() {
			return "", nil
		}
		user, pass, ok := r.BasicAuth()
		if !ok || user != "ops" || subtle.ConstantTimeCompare([]byte(pass), []byte("s3cret")) != 1 {
			return "", fmt.Errorf("%w: only ops may stop executions", admin.ErrUnauthenticated)
		}
		return "operator:" + user, nil
	}
	h, err := admin.NewHandler(store, admin.HandlerOptions{Path: "/admin/", Authorize: authorize})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/admin/", h)
	server := httptest.NewServer(mux) // the controller's HTTP server
	defer server.Close()

	anyone, _ := admin.NewClient(server.URL+"/admin/", admin.ClientOptions{})
	_, err = anyone.Stop(ctx, admin.StopRequest{ID: "ex-1", Reason: "no reason", Actor: "mallory"})
	fmt.Println(err)

	ops, _ := admin.NewClient(server.URL+"/admin/", admin.ClientOptions{Username: "ops", Password: "s3cret"})
	stopped, err := ops.Stop(ctx, admin.StopRequest{ID: "ex-1", Reason: "user asked", Actor: "ops"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s → %s by %s\n", stopped.ID, stopped.From, stopped.To, stopped.Actor)

	page, err := anyone.List(ctx, admin.ListOptions{Statuses: []string{"stopping"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range page.Items {
		fmt.Println(rec.ID, rec.Status)
	}
	// Output:
	// unauthenticated: only ops may stop executions
	// ex-1: running → stopping by operator:ops
	// ex-1 stopping
}

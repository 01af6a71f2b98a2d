package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/prom"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/transition"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// frameTime is how long one frame takes to render.
const frameTime = 20 * time.Millisecond

// runController is one controller process of the farm, on platform: it
// drives every job of the spool until a SIGTERM, then relocates or shuts
// each down as the platform means it, and returns the exit code the
// platform needs.
func runController(farm Farm, platform recovery.Platform, out io.Writer) int {
	code, err := control(farm, platform, out)
	if err != nil {
		fmt.Fprintln(out, "controller:", err)
	}
	return code
}

func control(farm Farm, platform recovery.Platform, out io.Writer) (int, error) {
	roles, err := farm.Lifecycle()
	if err != nil {
		return 1, err
	}
	db, err := boltstore.Open(farm.dbPath(), boltstore.Options{})
	if err != nil {
		return 1, err
	}
	defer db.Close()
	store, err := db.Store("renders")
	if err != nil {
		return 1, err
	}
	metrics := prom.New()
	observers, err := prom.RunObservers(metrics, roles, "renders")
	if err != nil {
		return 1, err
	}
	stop, err := serveMetrics(metrics, out)
	if err != nil {
		return 1, err
	}
	defer stop()
	return run.Manage(context.Background(), run.ManagerConfig[Status]{
		Roles: roles, Store: store, Table: "render-jobs", Platform: platform,
		Resumable: true, Failovers: recovery.Allowance{Count: 3, Window: 30 * time.Minute},
		World: farm.world, CreateMissing: true, Sync: farm.sync, Observers: observers,
		Logger: slog.New(slog.NewTextHandler(out, nil)),
	})
}

// world is what the spool holds: every job a user submitted.
func (f Farm) world(context.Context) ([]reconcile.Item[string], error) {
	jobs, err := f.Jobs()
	items := make([]reconcile.Item[string], 0, len(jobs))
	for id := range jobs {
		items = append(items, reconcile.Item[string]{Key: id})
	}
	return items, err
}

// sync moves a job one step: one frame, a cancellation, or its end.
func (f Farm) sync(ctx context.Context, job *transition.Persisted[Status], status Status) (run.Step, error) {
	frames, spooled, err := f.Job(job.ID())
	switch {
	case err != nil:
		return run.Step{}, err
	case !spooled && status != StatusCancelling:
		_, err := job.Fire(ctx, StatusCancelling, "withdrawn from the spool")
		return run.Step{}, err
	case status == StatusCancelling:
		return run.End(recovery.Ending{}), nil
	case status == StatusQueued:
		_, err := job.Fire(ctx, StatusRendering, "a renderer is free")
		return run.Step{}, err
	case status != StatusRendering:
		return run.Step{}, nil // paused: until someone resumes it
	}
	rendered, err := f.Rendered(job.ID())
	if err != nil {
		return run.Step{}, err
	}
	if rendered >= frames {
		return run.End(recovery.Ending{Finished: true}), nil
	}
	time.Sleep(frameTime) // the render itself
	if err := f.RenderFrame(job.ID(), rendered); err != nil {
		return run.End(recovery.Ending{Err: err}), nil
	}
	return run.After(time.Millisecond), nil
}

// serveMetrics serves metrics on a port of 127.0.0.1 and prints its
// address for the farm; stop stops serving.
func serveMetrics(metrics prometheus.Collector, out io.Writer) (stop func(), err error) {
	registry := prometheus.NewRegistry()
	if err := registry.Register(metrics); err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	server := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go server.Serve(listener)
	fmt.Fprintf(out, "metrics http://%s/metrics\n", listener.Addr())
	return func() { server.Close() }, nil
}

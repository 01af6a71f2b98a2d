package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/prom"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// frameTime is how long one frame takes to render.
const frameTime = 20 * time.Millisecond

// controller renders the farm's jobs, one frame per reconcile.
type controller struct {
	farm    Farm
	name    string // this process: the holder of what it owns, the actor of what it writes
	out     io.Writer
	table   *transition.Table[Status]
	store   storage.Store
	decider *recovery.Decider[Status]
	moves   transition.Observers[Status] // counts every move for Prometheus

	mu    sync.Mutex
	owned map[string]*transition.Persisted[Status] // the jobs this process took over
}

// runController is the controller process: it exits 143 when SIGTERM
// relocates a job, 0 when it shut down with nothing to hand over.
func runController(farm Farm, out io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	code, err := control(ctx, farm, out)
	if err != nil {
		fmt.Fprintln(out, "controller:", err)
		return 1
	}
	return code
}

func control(ctx context.Context, farm Farm, out io.Writer) (int, error) {
	table, roles, err := farm.Lifecycle()
	if err != nil {
		return 0, err
	}
	db, err := boltstore.Open(farm.dbPath(), boltstore.Options{})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	store, err := db.Store("renders")
	if err != nil {
		return 0, err
	}
	// The table, beside the jobs: the operator's CLI reads it, and a
	// table that would strand a job is refused here, not discovered later.
	if _, err := schema.Record(ctx, store, "render-jobs", roles); err != nil {
		return 0, err
	}

	metrics := prom.New()
	registry := prometheus.NewRegistry()
	if err := registry.Register(metrics); err != nil {
		return 0, err
	}
	moves, err := prom.NewTransitions(metrics, table)
	if err != nil {
		return 0, err
	}
	decisions, err := prom.RecoveryObserver(metrics, table)
	if err != nil {
		return 0, err
	}
	reconciles, err := prom.ReconcileObserver[string](metrics, "renders")
	if err != nil {
		return 0, err
	}
	adoptions, err := prom.AdoptionObserver[string](metrics, "renders")
	if err != nil {
		return 0, err
	}
	decider, err := recovery.NewDecider(roles, recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true),
		Failovers: recovery.Allowance{Count: 3, Window: 30 * time.Minute}})
	if err != nil {
		return 0, err
	}

	c := &controller{
		farm: farm, name: fmt.Sprintf("farm-%d", os.Getpid()), out: out,
		table: table, store: store, decider: decider.WithObserver(decisions), moves: moves.Observers(),
		owned: make(map[string]*transition.Persisted[Status]),
	}

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	server := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go server.Serve(listener)
	defer server.Close()
	fmt.Fprintf(out, "metrics http://%s/metrics\n", listener.Addr())

	// Events from the store bring a job back when someone else writes it;
	// this process's own writes are left out, or each frame's progress
	// would wake its job at once, whatever RequeueAfter says.
	loopCtx, stopLoop := context.WithCancel(context.Background())
	defer stopLoop()
	events, err := reconcile.StoreEvents(loopCtx, store, reconcile.StoreEventsOptions{SkipWritesBy: c.name})
	if err != nil {
		return 0, err
	}
	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Reconciler:        reconcile.ReconcilerFunc[string](c.Reconcile),
		World:             c.world,
		Known:             reconcile.StoreKeys(store),
		Adopter:           reconcile.AdopterFunc[string](c.adopt),
		Events:            events,
		Resync:            time.Second,
		Workers:           2,
		ReconcileObserver: reconciles,
		AdoptionObserver:  adoptions,
	})
	if err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- loop.Run(loopCtx) }()

	<-ctx.Done() // SIGTERM: the platform is moving this controller, or stopping it
	stopLoop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return 0, err
	}
	return c.terminate(context.Background()), nil
}

// world is what the spool holds: every job a user submitted.
func (c *controller) world(ctx context.Context) ([]reconcile.Item[string], error) {
	jobs, err := c.farm.Jobs()
	if err != nil {
		return nil, err
	}
	items := make([]reconcile.Item[string], 0, len(jobs))
	for id, frames := range jobs {
		items = append(items, reconcile.Item[string]{Key: id, Identity: reconcile.Identity{
			Annotations: map[string]string{metaFrames: strconv.Itoa(frames)},
		}})
	}
	return items, nil
}

// adopt gives a spooled job a record, queued, unless it has one.
func (c *controller) adopt(ctx context.Context, item reconcile.Item[string]) error {
	job, err := transition.NewPersisted(c.table, c.store, item.Key, transition.PersistedOptions{Actor: "spool"}, c.moves)
	if err != nil {
		return err
	}
	_, err = job.Create(ctx, transition.To(StatusQueued).Because("submitted").Set(metaFrames, item.Identity.Annotations[metaFrames]))
	if errors.Is(err, storage.ErrExists) {
		return nil
	}
	return err
}

// Reconcile takes a job over if this process does not own it yet, then
// moves it one step: one frame, a cancellation, or its end.
func (c *controller) Reconcile(ctx context.Context, id string) (reconcile.Result, error) {
	job, err := c.take(ctx, id)
	if job == nil || err != nil {
		return reconcile.Result{}, err
	}
	status, rec, err := job.Load(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	jobs, err := c.farm.Jobs()
	if err != nil {
		return reconcile.Result{}, err
	}
	frames, spooled := jobs[id]
	switch {
	case !spooled && status != StatusCancelling:
		_, err := job.Fire(ctx, StatusCancelling, "withdrawn from the spool")
		return reconcile.Result{RequeueAfter: time.Millisecond}, err
	case status == StatusCancelling:
		return reconcile.Result{}, c.finish(ctx, job, recovery.Ending{Finished: false})
	case status == StatusQueued:
		_, err := job.Fire(ctx, StatusRendering, "a renderer is free")
		return reconcile.Result{RequeueAfter: time.Millisecond}, err
	case status != StatusRendering:
		return reconcile.Result{}, nil // paused: wait for someone to resume it
	}
	rendered, err := c.farm.Rendered(id)
	if err != nil {
		return reconcile.Result{}, err
	}
	if rendered >= frames {
		return reconcile.Result{}, c.finish(ctx, job, recovery.Ending{Finished: true})
	}
	time.Sleep(frameTime) // the render itself
	if err := c.farm.RenderFrame(id, rendered); err != nil {
		return reconcile.Result{}, c.finish(ctx, job, recovery.Ending{Err: err})
	}
	progress := strconv.Itoa(rendered + 1)
	if rec.Meta[metaRendered] != progress {
		_, _, err = job.Apply(ctx, func(cur Status, _ storage.Record) (transition.Update[Status], error) {
			return transition.To(cur).Set(metaRendered, progress), nil
		})
	}
	return reconcile.Result{RequeueAfter: time.Millisecond}, err
}

// take returns this process's handle on a job, taking the job over first
// if needed; nil when the job is not this process's to drive.
func (c *controller) take(ctx context.Context, id string) (*transition.Persisted[Status], error) {
	c.mu.Lock()
	job := c.owned[id]
	c.mu.Unlock()
	if job != nil {
		return job, nil
	}
	job, err := transition.NewPersisted(c.table, c.store, id, transition.PersistedOptions{Actor: c.name}, c.moves)
	if err != nil {
		return nil, reconcile.TerminalError(err)
	}
	verdict, err := c.decider.Start(ctx, job, storage.Lease{Holder: c.name, TTL: 5 * time.Second, Wait: true})
	switch {
	case errors.Is(err, recovery.ErrTerminalStatus), errors.Is(err, storage.ErrNotFound):
		return nil, nil // over, or never ours
	case err != nil:
		return nil, err
	}
	fmt.Fprintf(c.out, "start %s: %s %s → %s (%s)\n", id, verdict.Decision, verdict.From, verdict.To, verdict.Reason)
	if verdict.Decision == recovery.DecisionFail {
		return nil, nil // failed is written: the failover allowance is spent
	}
	c.mu.Lock()
	c.owned[id] = job
	c.mu.Unlock()
	return job, nil
}

// finish writes the end the job earned and lets it go.
func (c *controller) finish(ctx context.Context, job *transition.Persisted[Status], ending recovery.Ending) error {
	end, err := c.decider.Finish(ctx, job, ending, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "end %s: %s\n", job.ID(), end.To)
	c.mu.Lock()
	delete(c.owned, job.ID())
	c.mu.Unlock()
	return nil
}

// terminate hands over or shuts down every job this process owns, and
// says how to exit: 143 if any job waits for the next controller.
func (c *controller) terminate(ctx context.Context) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	code := 0
	for id, job := range c.owned {
		action, err := c.decider.Terminate(ctx, job, nil)
		if err != nil {
			fmt.Fprintf(c.out, "sigterm %s: %v\n", id, err)
			continue
		}
		fmt.Fprintf(c.out, "sigterm %s: %s\n", id, action.Kind)
		if action.Kind == recovery.ActionShutdown {
			// A job still queued cannot end before it ran (Finish says
			// so): exiting lets it go, and the next controller starts it.
			if end, err := c.decider.Finish(ctx, job, recovery.Ending{Finished: false}, nil); err != nil {
				fmt.Fprintf(c.out, "end %s: %v\n", id, err)
			} else {
				fmt.Fprintf(c.out, "end %s: %s\n", id, end.To)
			}
		}
		code = max(code, action.ExitCode)
	}
	return code
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// controllerConfig is what the supervisor tells an execution controller.
type controllerConfig struct {
	Store       stores.Config `json:"store"`
	Execution   string        `json:"execution"`
	Name        string        `json:"name"` // the pod name
	Slices      int           `json:"slices"`
	Restartable bool          `json:"restartable"`
	Budget      int           `json:"budget"`
	// LateWrite makes a relocating controller stay alive after it wrote
	// relocating and try one more write when told (SIGUSR1), as a slow
	// pod still finishing a slice during a relocation overlap would.
	LateWrite bool `json:"late_write"`
}

// Exit codes of a controller besides the ones recovery.Action gives, for
// this example's supervisor to tell the outcomes apart. A controller run
// by a Kubernetes Job exits 0 for these instead (see kube.ControllerJob):
// any other code would start a replacement that refuses.
const (
	exitRefused = 3 // Startup refused: the execution is over
	exitFailed  = 4 // Startup failed the execution (failover allowance spent)
	exitError   = 5 // something went wrong
)

const (
	sliceEvery      = 20 * time.Millisecond
	checkpointEvery = 20 // slices
	leaseTTL        = 2 * time.Second
	metaSlices      = "slices"
)

// slicer is the fake work: it produces numbered slices and can be picked
// up by another process, because its progress is checkpointed into the
// execution's record.
type slicer struct {
	restartable bool
	done        int
}

func (s *slicer) IsRestartable() bool { return s.restartable }

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func runController(raw json.RawMessage) int {
	var cfg controllerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		say("error bad config: %v", err)
		return exitError
	}
	code, err := controller(cfg)
	if err != nil {
		say("error %v", err)
		return exitError
	}
	return code
}

func controller(cfg controllerConfig) (int, error) {
	// SIGTERM is handled from the start: a pod may be drained at any time.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	lateWrite := make(chan os.Signal, 1)
	signal.Notify(lateWrite, syscall.SIGUSR1)
	ctx := context.Background()

	store, closeStore, err := cfg.Store.Open()
	if err != nil {
		return 0, err
	}
	defer closeStore()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, cfg.Execution, transition.PersistedOptions{Actor: cfg.Name, History: storage.MaxHistory})
	if err != nil {
		return 0, err
	}

	// The startup path is the same on every store: take the execution
	// over (waiting, as a restarted pod must, for a crashed predecessor's
	// lease to expire; a live one is never taken over), then decide.
	work := &slicer{restartable: cfg.Restartable}
	decider, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: recovery.KubernetesJob, Work: work,
		Failovers: recovery.Allowance{Count: cfg.Budget, Window: teraslice.Failovers.Window}})
	if err != nil {
		return 0, err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	verdict, err := decider.Start(startCtx, exec, storage.Lease{Holder: cfg.Name, TTL: leaseTTL, Wait: true})
	say("verdict %s %s: %s", verdict.Decision, verdict.To, verdict.Reason)
	proc.Emit("verdict", "decision", verdict.Decision.String(), "to", verdict.To.String())
	switch {
	case errors.Is(err, recovery.ErrTerminalStatus):
		return exitRefused, nil
	case err != nil:
		return 0, err
	}
	// Let go when this process is done with the execution, so the next
	// controller need not wait for the lease (relocating has let go already).
	defer func() { _ = exec.Ownership().Release(context.Background()) }()
	say("owner %s at epoch %d", exec.Claim().Owner, exec.Claim().Epoch)
	proc.Emit("owner", "owner", exec.Claim().Owner, "epoch", strconv.FormatUint(exec.Claim().Epoch, 10))
	switch verdict.Decision {
	case recovery.DecisionFail:
		return exitFailed, nil
	case recovery.DecisionStop:
		// Nothing of the work runs: end the stop (the deadline may have
		// ended it already, and then only the statistics are written).
		return finish(ctx, decider, exec, recovery.Ending{}, nil)
	case recovery.DecisionStart:
		if _, err := exec.Fire(ctx, state.Running, "slicer ready, workers connected"); err != nil {
			return 0, err
		}
	}
	_, rec, err := exec.Load(ctx)
	if err != nil {
		return 0, err
	}
	work.done, _ = strconv.Atoi(rec.Meta[metaSlices])
	say("status %s", rec.Status)
	proc.Emit("status", "status", rec.Status)

	checkpoint := func(ctx context.Context) error {
		_, _, err := exec.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
			return transition.To(cur).Set(metaSlices, strconv.Itoa(work.done)), nil
		})
		return err
	}
	tick := time.NewTicker(sliceEvery)
	defer tick.Stop()
	for {
		select {
		case <-terms:
			return terminate(ctx, cfg, exec, decider, checkpoint, lateWrite)
		case <-tick.C:
		}
		work.done++
		if work.done%5 == 0 {
			say("slices %d", work.done)
			proc.Emit("slices", "done", strconv.Itoa(work.done))
		}
		if work.done >= cfg.Slices {
			return finish(ctx, decider, exec, recovery.Ending{Finished: true}, map[string]string{metaSlices: strconv.Itoa(work.done)})
		}
		if work.done%checkpointEvery == 0 {
			if err := checkpoint(ctx); err != nil {
				return 0, err
			}
		}
	}
}

func terminate(ctx context.Context, cfg controllerConfig, exec *transition.Persisted[state.Status],
	decider *recovery.Decider[state.Status], checkpoint func(context.Context) error, lateWrite chan os.Signal) (int, error) {
	action, err := decider.Terminate(ctx, exec, checkpoint)
	if err != nil {
		return 0, err
	}
	say("terminate %s: %s", action.Kind, action.Reason)
	proc.Emit("terminate", "action", action.Kind.String())
	switch action.Kind {
	case recovery.ActionRelocate:
		// Decider.Terminate let go of the execution: the successor takes
		// over at once instead of after the lease's TTL.
		if action.ReleaseErr != nil {
			return 0, action.ReleaseErr
		}
		if cfg.LateWrite {
			say("lingering")
			proc.Emit("lingering")
			<-lateWrite
			err := checkpoint(ctx)
			switch {
			case errors.Is(err, storage.ErrFenced):
				say("late write fenced: %v", err)
				proc.Emit("late-write", "result", "fenced")
			case err != nil:
				return 0, err
			default:
				say("late write accepted")
				proc.Emit("late-write", "result", "accepted")
			}
		}
		return action.ExitCode, nil
	case recovery.ActionLeave:
		say("leave: %s", action.Reason)
		return action.ExitCode, nil // not 0 where the platform restarts controllers: another must come
	}
	// Shutdown: the work stops before it finished; the final status is
	// stopped if the cluster master asked, terminated otherwise.
	return finish(ctx, decider, exec, recovery.Ending{}, nil)
}

// finish writes the final status the work earned, with its statistics,
// and lets the execution go. The process exits 0 whatever the status (the
// outcome is in the record), unless the execution was not this
// controller's to end: then as end.ExitCode says.
func finish(ctx context.Context, decider *recovery.Decider[state.Status], exec *transition.Persisted[state.Status], ending recovery.Ending, stats map[string]string) (int, error) {
	end, err := decider.End(ctx, exec, ending, stats)
	if err != nil {
		return 0, err
	}
	if end.ReleaseErr != nil {
		return 0, end.ReleaseErr
	}
	say("finish %s: %s", end.Kind, end.Reason)
	say("status %s", end.To)
	proc.Emit("finish", "kind", end.Kind.String())
	proc.Emit("status", "status", end.To.String())
	return end.ExitCode, nil
}

package main

import (
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
)

// Phase is a TrainingJob's phase: what `kubectl get trainingjobs` shows
// in its Phase column, from the resource's .status.phase.
type Phase string

// The phases. A drained node relocates a Job (not counted); an OOM kill
// restarts it, counted against its spec's maxRetry.
const (
	Pending    Phase = "Pending"    // its pod is not running yet
	Running    Phase = "Running"    // its pod runs
	Relocating Phase = "Relocating" // its node was drained: a new pod takes it up where it was
	Restarting Phase = "Restarting" // its pod failed (an OOM kill): counted, then Pending again
	Stopping   Phase = "Stopping"   // its user asked it to stop: its pods are being deleted
	Succeeded  Phase = "Succeeded"
	Stopped    Phase = "Stopped"
	Failed     Phase = "Failed"
)

// restarts counts a Job's moves into Restarting; its budget is the
// spec's maxRetry.
const restarts = "restarts"

// lifecycle is the TrainingJob's: the moves its sync makes, and what
// each phase means to the recovery decisions (the rest of the table
// follows from them).
func lifecycle() (*recovery.Roles[Phase], error) {
	table := transition.New(Pending).
		Allow(Pending, Running).
		Allow(Running, Restarting).
		Count(restarts, Running, Restarting)
	return recovery.DefineLifecycle(table).
		NotStarted(Pending).
		Running(Running).
		Relocating(Relocating, Pending).
		Stopping(Stopping, Stopped).
		Stopping(Restarting, Pending).
		Failed(Failed).
		Ends(Succeeded, Stopped).
		Budget(recovery.Budget[Phase]{Counter: restarts, Exhausted: Failed}).
		Build()
}

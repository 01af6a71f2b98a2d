package main

import (
	"context"
	"fmt"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/volcano"
)

// Phase is a Volcano Job's phase, the preset's.
type Phase = volcano.Phase

// Volcano's Job phases.
const (
	Pending     = volcano.Pending
	Running     = volcano.Running
	Restarting  = volcano.Restarting
	Aborting    = volcano.Aborting
	Aborted     = volcano.Aborted
	Completing  = volcano.Completing
	Completed   = volcano.Completed
	Terminating = volcano.Terminating
	Terminated  = volcano.Terminated
	Failed      = volcano.Failed
)

// Action is a bus action a Job's controller-manager is asked to carry
// out (volcano.sh/apis bus/v1alpha1 Action), by a user (vcctl job
// suspend, resume) or by a Job's policies (a pod evicted restarts the
// job).
type Action string

// The actions the Job state machine distinguishes; any other is a sync.
const (
	AbortJob     Action = "AbortJob"
	RestartJob   Action = "RestartJob"
	TerminateJob Action = "TerminateJob"
	CompleteJob  Action = "CompleteJob"
	ResumeJob    Action = "ResumeJob"
	SyncJob      Action = "SyncJob"
	Enqueue      Action = "EnqueueJob"
)

// Task is one task of a Job's spec.
type Task struct {
	Name         string `json:"name"`
	Replicas     int32  `json:"replicas"`
	MinAvailable *int32 `json:"min_available,omitempty"`
}

// Spec is what the state machine reads of a Job's spec.
type Spec struct {
	MinAvailable int32  `json:"min_available"`
	MinSuccess   *int32 `json:"min_success,omitempty"`
	MaxRetry     int32  `json:"max_retry,omitempty"`
	Tasks        []Task `json:"tasks,omitempty"`
}

// Pods counts a Job's pods by phase, as Volcano's JobStatus does;
// Succeeded by task is what the tasks' own minAvailable is checked
// against.
type Pods struct {
	Pending     int32            `json:"pending,omitempty"`
	Running     int32            `json:"running,omitempty"`
	Succeeded   int32            `json:"succeeded,omitempty"`
	Failed      int32            `json:"failed,omitempty"`
	Terminating int32            `json:"terminating,omitempty"`
	ByTask      map[string]int32 `json:"by_task,omitempty"` // succeeded pods of each task
}

// limitMeta is the metadata that gives a Job created with spec its own
// retry limit.
func limitMeta(spec Spec) map[string]string { return volcano.MaxRetry(int(spec.MaxRetry)) }

// Manager carries out actions on Jobs, as Volcano's controller-manager
// does (pkg/controllers/job/state/*.go), through execfsm: the moves
// through the Job's Persisted handle (retries counted by the table), the
// budget by the roles, the ends a drain earns by the roles, the end the
// work earned by EndAs' check. Killing and creating pods is not its
// business here: the pods are the world's.
type Manager struct {
	Roles  *recovery.Roles[Phase]
	Decide *recovery.Decider[Phase]
}

// Execute carries out action on the Job exec drives, whose spec and pods
// are as given, and returns the phase it is in afterwards. A manager
// calls it from its reconcile loop (action SyncJob) and when asked
// (RestartJob, AbortJob, ...).
func (m Manager) Execute(ctx context.Context, exec *transition.Persisted[Phase], action Action, spec Spec, pods Pods) (Phase, error) {
	cur, _, err := exec.Load(ctx)
	if err != nil {
		return cur, err
	}
	if cur == Restarting {
		// A Job restarted more often than its limit allows fails, as
		// Volcano's Restarting phase fails a Job whose RetryCount reached
		// maxRetry: the roles' budget, enforced with its reason.
		e, _, err := m.Decide.Advance(ctx, exec)
		if err != nil || e.Cause != 0 {
			return e.To, err
		}
	}
	to, ok := m.next(cur, action, spec, pods)
	if !ok {
		return cur, nil
	}
	if role, _ := m.Roles.Role(cur); role == recovery.RoleRunning && m.Roles.Table().IsTerminal(to) {
		// The work is over: the end it earned, checked against the table.
		end, err := m.Decide.EndAs(ctx, exec, to, finishReason(to, spec, pods), nil)
		return end.To, err
	}
	if _, err := exec.Fire(ctx, to, string(action)); err != nil {
		return cur, err
	}
	return to, nil
}

// next is where action takes a Job in cur (and false when it stays),
// Volcano's state machine phase by phase.
func (m Manager) next(cur Phase, action Action, spec Spec, pods Pods) (Phase, bool) {
	stop := func(to Phase) (Phase, bool) { return to, true }
	switch cur {
	case Pending:
		switch action {
		case RestartJob, AbortJob, TerminateJob, CompleteJob:
			return stop(kill[action])
		}
		if spec.MinAvailable <= pods.Running+pods.Succeeded+pods.Failed {
			return Running, true
		}
	case Running:
		switch action {
		case RestartJob, AbortJob, TerminateJob, CompleteJob:
			return stop(kill[action])
		}
		return m.sync(spec, pods)
	case Restarting:
		if restarted(spec, pods) {
			return Pending, true
		}
	case Aborting:
		if action == ResumeJob {
			return Restarting, true
		}
		if drained(pods) {
			return m.end(cur)
		}
	case Aborted:
		if action == ResumeJob {
			return Restarting, true
		}
	case Completing, Terminating:
		if drained(pods) {
			return m.end(cur)
		}
	}
	return cur, false
}

// kill is where an action that kills the Job's pods takes it first.
var kill = map[Action]Phase{RestartJob: Restarting, AbortJob: Aborting, TerminateJob: Terminating, CompleteJob: Completing}

// end is the end of the drain cur, as the roles name it.
func (m Manager) end(cur Phase) (Phase, bool) { return m.Roles.End(cur) }

// sync is a running Job's sync: its end once every pod has finished,
// Pending again when too many of its pods are pending.
func (m Manager) sync(spec Spec, pods Pods) (Phase, bool) {
	replicas := totalReplicas(spec)
	if replicas == 0 {
		return Running, false
	}
	if spec.MinSuccess != nil && pods.Succeeded >= *spec.MinSuccess {
		return Completed, true
	}
	if pods.Succeeded+pods.Failed == replicas {
		if spec.MinAvailable >= totalTaskMinAvailable(spec) {
			for _, task := range spec.Tasks {
				if task.MinAvailable != nil && pods.ByTask[task.Name] < *task.MinAvailable {
					return Failed, true
				}
			}
		}
		switch {
		case spec.MinSuccess != nil && pods.Succeeded < *spec.MinSuccess:
			return Failed, true
		case pods.Succeeded >= spec.MinAvailable:
			return Completed, true
		}
		return Failed, true
	}
	if pods.Pending > replicas-spec.MinAvailable {
		return Pending, true
	}
	return Running, false
}

// finishReason says why a running Job ended where it did.
func finishReason(to Phase, spec Spec, pods Pods) string {
	return fmt.Sprintf("%s: %d of %d pods succeeded, %d failed (minAvailable %d)", to, pods.Succeeded, totalReplicas(spec), pods.Failed, spec.MinAvailable)
}

// restarted says whether a restarting Job's pods are gone enough for it
// to be pending again: Volcano's total-terminating >= minAvailable.
func restarted(spec Spec, pods Pods) bool {
	return totalReplicas(spec)-pods.Terminating >= spec.MinAvailable
}

// drained says whether a drain's pods are all gone.
func drained(pods Pods) bool {
	return pods.Terminating == 0 && pods.Pending == 0 && pods.Running == 0
}

func totalReplicas(spec Spec) int32 {
	var n int32
	for _, t := range spec.Tasks {
		n += t.Replicas
	}
	return n
}

// totalTaskMinAvailable is the sum of the tasks' own minAvailable (their
// replicas where they give none), as Volcano's TotalTaskMinAvailable.
func totalTaskMinAvailable(spec Spec) int32 {
	var n int32
	for _, t := range spec.Tasks {
		if t.MinAvailable != nil {
			n += *t.MinAvailable
		} else {
			n += t.Replicas
		}
	}
	return n
}

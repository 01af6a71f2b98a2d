package kube

import (
	"fmt"
	"slices"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition types the store writes on a custom resource (see
// Resource.Progress), those of kstatus (sigs.k8s.io/cli-utils), which
// Flux, Argo CD and `kubectl wait` read to tell whether a resource is
// done: Ready is True once the execution ended well; Reconciling (work
// under way) and Stalled (it ended in failure) follow kstatus's
// "abnormal-true" convention, present only while True.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// Progress is where an execution's state stands, as the conditions
// tell it.
type Progress uint8

const (
	// ProgressWorking: work is under way or about to be (not started,
	// running, relocating, stopping, finishing). Reconciling is True,
	// Ready False: kstatus says InProgress.
	ProgressWorking Progress = iota + 1
	// ProgressParked: nothing runs until someone moves it on (a
	// suspended job). Ready is False, nothing abnormal, nothing under
	// way (no Reconciling): kstatus says InProgress, as it does of a
	// suspended batch/v1 Job (one not started).
	ProgressParked
	// ProgressDone: it ended, not in failure. Ready is True: kstatus
	// says Current.
	ProgressDone
	// ProgressFailed: it ended in failure. Stalled is True, Ready False:
	// kstatus says Failed.
	ProgressFailed
)

func (p Progress) String() string {
	switch p {
	case ProgressWorking:
		return "working"
	case ProgressParked:
		return "parked"
	case ProgressDone:
		return "done"
	case ProgressFailed:
		return "failed"
	}
	return fmt.Sprintf("Progress(%d)", uint8(p))
}

// ProgressOf returns where each state of roles stands, by its name: its
// role says (the failed state is ProgressFailed, every other end
// ProgressDone, a parked state ProgressParked, the rest
// ProgressWorking); a name the table does not have is not known (false).
func ProgressOf[S comparable](roles *recovery.Roles[S]) func(state string) (Progress, bool) {
	table := roles.Table()
	byName := map[string]Progress{}
	for _, s := range table.States() {
		name, ok := table.Name(s)
		if !ok {
			continue
		}
		role, _ := roles.Role(s)
		switch {
		case s == roles.Failed():
			byName[name] = ProgressFailed
		case role == recovery.RoleTerminal:
			byName[name] = ProgressDone
		case role == recovery.RoleParked:
			byName[name] = ProgressParked
		default:
			byName[name] = ProgressWorking
		}
	}
	return func(state string) (Progress, bool) {
		p, ok := byName[state]
		return p, ok
	}
}

// Conditions returns the conditions of a resource whose record is rec,
// at generation, from the conditions it had (prior): the three of this
// package computed from progress, every other type kept as it was.
// A condition's LastTransitionTime moves (to rec.UpdatedAt, when the
// move was made) only when its status changes, as
// meta.SetStatusCondition does; each carries generation as its
// ObservedGeneration. Reasons are the state's name in UpperCamelCase
// (relocating is Relocating), messages the record's reason.
func Conditions(progress Progress, rec storage.Record, generation int64, prior []metav1.Condition) []metav1.Condition {
	out := slices.Clone(prior)
	reason := eventReason(rec.Status)
	if reason[0] < 'A' {
		reason = "State" + reason // a condition's reason starts with a letter
	}
	message := rec.Reason
	if message == "" {
		message = rec.Status
	}
	at := rec.UpdatedAt
	if at.IsZero() {
		at = time.Now()
	}
	set := func(kind string, status metav1.ConditionStatus) {
		meta.SetStatusCondition(&out, metav1.Condition{Type: kind, Status: status, Reason: reason, Message: message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(at.UTC().Truncate(time.Second))})
	}
	switch progress {
	case ProgressWorking:
		set(ConditionReady, metav1.ConditionFalse)
		set(ConditionReconciling, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&out, ConditionStalled)
	case ProgressParked:
		set(ConditionReady, metav1.ConditionFalse)
		meta.RemoveStatusCondition(&out, ConditionReconciling)
		meta.RemoveStatusCondition(&out, ConditionStalled)
	case ProgressDone:
		set(ConditionReady, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&out, ConditionReconciling)
		meta.RemoveStatusCondition(&out, ConditionStalled)
	case ProgressFailed:
		set(ConditionReady, metav1.ConditionFalse)
		set(ConditionStalled, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&out, ConditionReconciling)
	default:
		set(ConditionReady, metav1.ConditionUnknown)
		meta.RemoveStatusCondition(&out, ConditionReconciling)
		meta.RemoveStatusCondition(&out, ConditionStalled)
	}
	return out
}

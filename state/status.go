package state

import (
	"fmt"
	"strings"

	"github.com/execfsm/execfsm/internal/unknown"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Status is the lifecycle status of one execution.
//
// The zero value is not a status: a Status read from nowhere (an
// uninitialised field, a failed decode) is caught by [Status.Valid] instead
// of silently meaning "pending". The text form of every status is its
// lowercase name, identical to Teraslice's `_status` values, so records
// written by Teraslice decode unchanged.
type Status uint8

// The statuses, in lifecycle order. Each paragraph says what the status
// means, who moves an execution out of it, and what a controller that
// finds it on startup (after a crash, a relocation or a restart) must do.
// Its "Moves to" line is every status the canonical lifecycle
// (teraslice.Lifecycle) allows next; a test holds it to the table.
const (
	// Pending: the execution was submitted and waits in the cluster
	// master's queue. Nothing runs yet. The cluster master moves it to
	// Scheduling when it dequeues it, or to Rejected if it will never
	// schedule it; a user may stop it. Found on controller startup: the
	// controller was started early; start normally.
	//
	// Moves to: scheduling, stopping, rejected.
	Pending Status = iota + 1

	// Scheduling: the cluster master is placing the execution controller
	// (allocating the slicer). It moves to Initializing once placed, or to
	// Failed or Rejected if placement fails; a user may stop it. Nothing
	// retries a placement whose cluster master died here (Teraslice
	// re-queues only pending executions): past teraslice.StrandedAfter
	// the deadline reaper (recovery.Reaper with teraslice.Roles()) fails
	// it. Found on controller startup: start normally.
	//
	// Moves to: initializing, stopping, rejected, failed.
	Scheduling

	// Initializing: the execution controller process exists and is
	// setting up (loading assets, creating slicers, waiting for workers).
	// The controller moves it to Running, or to Recovering when the
	// execution resumes an earlier one; a setup error moves it to Failed,
	// a stop request to Stopping, a shutdown before it got going to
	// Terminated; a setup that never ends (the controller died and nobody
	// replaced it) is failed by the deadline reaper past teraslice.StrandedAfter.
	// Found on startup: start normally.
	//
	// Moves to: running, recovering, stopping, failed, terminated.
	Initializing

	// Running: the controller is producing work and workers are
	// processing it. The controller moves it to Completed or Failed when
	// the work ends, the slice watchdog to Failing on slice errors, the
	// cluster master to Paused or Stopping on request, the platform's
	// SIGTERM handler to Relocating. Found on startup without having been
	// marked Relocating: the previous controller died without being asked
	// (OOM kill, node loss); recovery.Startup decides between resuming
	// within a failover allowance and Failed, never "keep running".
	//
	// Moves to: relocating, failing, paused, stopping, completed, failed,
	// terminated.
	Running

	// Recovering: like Running, but the controller first re-processes the
	// unfinished work of an earlier, ended execution (Teraslice's
	// recover): this one was created by recovery.Rerun, and its startup
	// verdict names the execution it reruns (Verdict.RerunOf), so after
	// its setup the controller writes Recovering instead of Running. It
	// moves to Running when that work is done, and otherwise like Running. Found on
	// startup: as for Running.
	//
	// Moves to: running, relocating, failing, paused, stopping, completed,
	// failed, terminated.
	Recovering

	// Relocating: the platform is moving a healthy controller to another
	// place (pod deleted, node drained) and the execution must survive the
	// move. Only the SIGTERM handler of a controller whose work can be
	// restarted sets it, remembering the status it left. A new controller
	// finding it on startup takes ownership (a new epoch, which fences the
	// old process) and returns to the remembered status, so a paused
	// execution comes back paused. Relocating that lasts past its deadline
	// (nobody took over) is moved to Failed by a reconciler; the cluster
	// master may stop it meanwhile, and a new controller may re-run its
	// setup (Initializing) instead of returning. This is a running
	// status: the execution is alive, only moving.
	//
	// Moves to: initializing, running, recovering, failing, paused,
	// stopping, failed, terminated (of running, recovering, failing and
	// paused only the remembered one).
	Relocating

	// Failing: slices are failing; the slice watchdog is on probation. It
	// moves back to Running (or Recovering) when slices succeed again for
	// a probation window, to Failed when the execution ends with errors,
	// or to Completed when it ends with none left failed. Found on
	// startup: as for Running.
	//
	// Moves to: running, recovering, relocating, paused, stopping,
	// completed, failed, terminated.
	Failing

	// Paused: a user asked the cluster master to pause; the controller
	// keeps its state but dispatches nothing. Resume moves it back to
	// Running; slices dispatched before the pause may finish the work,
	// and the controller writes Completed. Found on startup: as for
	// Running (a crash while paused is still a crash); after a relocation
	// it comes back Paused.
	//
	// Moves to: running, relocating, stopping, completed, failed,
	// terminated.
	Paused

	// Stopping: the cluster master asked the execution to stop. The
	// controller finishes in-flight work and moves it to Stopped, or to
	// Completed if the work happened to finish first; an error while
	// stopping moves it to Failed, a cluster shutdown to Terminated. A
	// SIGTERM in this
	// status means "shut down", never "relocate". Stopping that lasts past
	// the shutdown timeout is moved to Stopped by a reaper.
	//
	// Moves to: completed, stopped, failed, terminated.
	Stopping

	// Completed: the work finished without errors. Terminal: no status
	// follows and a controller finding it on startup refuses to run.
	//
	// Moves to: nothing.
	Completed

	// Stopped: the execution was stopped on request. Terminal.
	//
	// Moves to: nothing.
	Stopped

	// Rejected: the cluster master refused the execution before it was
	// scheduled. Terminal.
	//
	// Moves to: nothing.
	Rejected

	// Failed: the execution ended because of an error: slice failures,
	// a setup error, a crash past the failover allowance, a relocation no
	// controller took over. The record's reason says which. Terminal.
	//
	// Moves to: nothing.
	Failed

	// Terminated: the execution was shut down before its work could
	// finish and without a stop request (the controller or the whole
	// cluster was shut down). Terminal.
	//
	// Moves to: nothing.
	Terminated
)

// NumStatuses is the number of valid statuses; the valid values are 1
// through NumStatuses.
const NumStatuses = int(Terminated)

// ErrUnknownStatus is returned, wrapped, for a text that names no status.
// It is the same error as transition.ErrUnknownState: errors.Is matches
// either name, whether state.Parse or a table refused the text.
var ErrUnknownStatus = unknown.ErrState

var names = [...]string{
	Pending:      "pending",
	Scheduling:   "scheduling",
	Initializing: "initializing",
	Running:      "running",
	Recovering:   "recovering",
	Relocating:   "relocating",
	Failing:      "failing",
	Paused:       "paused",
	Stopping:     "stopping",
	Completed:    "completed",
	Stopped:      "stopped",
	Rejected:     "rejected",
	Failed:       "failed",
	Terminated:   "terminated",
}

// validNames is the list quoted by every parse error, so a caller who
// typed "Running" learns the spelling that works.
var validNames = strings.Join(names[1:], ", ")

// Valid reports whether s is one of the declared statuses.
func (s Status) Valid() bool { return s >= Pending && s <= Terminated }

// String returns the lowercase name ("relocating"), or "Status(N)" for a
// value that is not a status.
func (s Status) String() string {
	if !s.Valid() {
		return fmt.Sprintf("Status(%d)", uint8(s))
	}
	return names[s]
}

// MarshalText implements [encoding.TextMarshaler]. It refuses an invalid
// status rather than writing a name no reader could parse back.
func (s Status) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("state: cannot marshal invalid Status(%d)", uint8(s))
	}
	return []byte(names[s]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with [Parse]. On
// error s is left unchanged.
func (s *Status) UnmarshalText(text []byte) error {
	v, err := parse(text)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Parse returns the status whose name is text. Matching is exact: names
// are lowercase and carry no whitespace, so "Running" and " running" are
// errors, not guesses. The error wraps [ErrUnknownStatus] and lists the
// valid names.
func Parse(text string) (Status, error) {
	return parse([]byte(text))
}

func parse(text []byte) (Status, error) {
	// A linear scan over 14 short names beats a map here and allocates
	// nothing (the string conversion in the comparison does not escape).
	for s := Pending; s <= Terminated; s++ {
		if string(text) == names[s] {
			return s, nil
		}
	}
	return 0, fmt.Errorf("state: %w %s (valid: %s)", ErrUnknownStatus, quote.Limited(string(text)), validNames)
}

// IsInit reports whether s is an init status: the execution exists but its
// controller has not started working (pending, scheduling, initializing).
func (s Status) IsInit() bool { return InitStatuses.Has(s) }

// IsRunning reports whether s is a running status: a controller is (or
// should be) driving the execution. Relocating is one.
func (s Status) IsRunning() bool { return RunningStatuses.Has(s) }

// IsTerminal reports whether s is final: no status may follow it.
func (s Status) IsTerminal() bool { return TerminalStatuses.Has(s) }

// IsFailed reports whether s is a terminal status that did not end well.
func (s Status) IsFailed() bool { return FailedStatuses.Has(s) }

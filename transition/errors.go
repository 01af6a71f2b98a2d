package transition

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; [*Error] carries the
// details of a refused move.
var (
	// ErrNotAllowed: the table has no such move (or a return edge leads
	// somewhere other than back).
	ErrNotAllowed = errors.New("transition not allowed")

	// ErrGuard: a guard vetoed the move. The error also unwraps to the
	// guard's own error.
	ErrGuard = errors.New("transition vetoed by guard")

	// ErrNotEnded: [Persisted.Delete] of an execution whose state is not
	// terminal, without Force. Nothing was deleted.
	ErrNotEnded = errors.New("execution has not ended")
)

// Error is a move the table or a guard refused. errors.Is matches it
// against [ErrGuard] when a guard refused (Guard is set) and against
// [ErrNotAllowed] when the table did; errors.As reaches the guard's own
// error through it. Every field is exported, so a test can build the
// error it expects and compare.
type Error struct {
	ID     string // the execution's id, when known
	From   string // text form of the state the move started from
	To     string // text form of the state it tried to reach
	Reason string // why the table refused it, for people
	Guard  error  // the vetoing guard's error; nil when the table refused
}

func (e *Error) Error() string {
	where := ""
	if e.ID != "" {
		where = e.ID + ": "
	}
	kind := ErrNotAllowed
	if e.Guard != nil {
		kind = ErrGuard
	}
	msg := fmt.Sprintf("transition: %s%s → %s: %v", where, e.From, e.To, kind)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Guard != nil {
		msg += ": " + e.Guard.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrGuard) hold for a guard's veto and
// errors.Is(err, ErrNotAllowed) for the table's refusal.
func (e *Error) Is(target error) bool {
	if e.Guard != nil {
		return target == ErrGuard
	}
	return target == ErrNotAllowed
}

// Unwrap returns the guard's error.
func (e *Error) Unwrap() error { return e.Guard }

func notAllowed(id, from, to, reason string) *Error {
	return &Error{ID: id, From: from, To: to, Reason: reason}
}

// Errors of zero values: every method of a zero Machine or Persisted that
// could block or write returns one, saying which constructor to use,
// rather than panicking or hanging.
var (
	errZeroMachine   = errors.New("transition: zero Machine: make one with NewMachine or NewMachineAt")
	errZeroPersisted = errors.New("transition: zero Persisted: make one with NewPersisted")
)

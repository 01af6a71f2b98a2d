package recovery

import (
	"errors"
	"fmt"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"github.com/execfsm/execfsm/transition"
)

// ErrForeignStatus is matched by the errors of the decisions for a record
// the controller's table cannot decide on: its status is not one of the
// table's, or its previous status is not and its status returns there (a
// relocating record going back to a status only another table has). Such
// a record was written by a newer version of the table while two
// versions of the controller run (a rolling upgrade, or a rollback), or
// by another table. The error also matches transition.ErrUnknownState.
//
// Every decision leaves such a record alone: [Decider.Start] writes
// nothing, takes nothing over and counts no restart; [Decider.Terminate]
// and [Decider.End] leave (ActionLeave, EndLeave), releasing the
// ownership so that a controller whose table knows the status takes over
// at once; [Decider.Abandon] writes nothing; the [Reaper] enforces no
// deadline on it. Leave it to a controller whose table knows the status
// (schema's Document.Knows says which version does).
var ErrForeignStatus = errors.New("status of another table")

// StateOf returns the state of rec in the roles' table, or an error
// matching ErrForeignStatus and transition.ErrUnknownState when the table
// cannot decide on rec: the check every decision makes first. A previous
// status outside the table matters only where the record may return to
// it: a record that left a status of another table for one of its own
// (held, then running) is this table's to drive.
func (r *Roles[S]) StateOf(rec storage.Record) (S, error) {
	if r == nil {
		var zero S
		return zero, fmt.Errorf("recovery: %w: nil roles", ErrInvalidRoles)
	}
	t := r.table
	cur, err := t.Parse(rec.Status)
	if err != nil {
		return cur, fmt.Errorf("recovery: execution %s: %w: %w", quote.Limited(rec.ID), ErrForeignStatus, err)
	}
	if rec.Previous == "" || !t.Returns(cur) {
		return cur, nil
	}
	if _, err := t.Parse(rec.Previous); err != nil {
		return cur, fmt.Errorf("recovery: execution %s, in %s, returns to the status it left: %w: %w",
			quote.Limited(rec.ID), rec.Status, ErrForeignStatus, err)
	}
	return cur, nil
}

// foreign reports whether err says that a record is one the table cannot
// decide on: the roles' own check (StateOf), or a transition.Persisted
// refusing a status its table does not know.
func foreign(err error) bool {
	return errors.Is(err, ErrForeignStatus) || errors.Is(err, transition.ErrUnknownState)
}

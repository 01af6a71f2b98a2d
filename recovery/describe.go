package recovery

import (
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/transition"
)

// RolesDescription is a table's roles as data, by the states' names: what
// a store keeps beside the table's description (transition.Description)
// so that a tool outside the controller's process decides as the
// controller does. Deadlines are those given with RolesBuilder.Deadline;
// the default ones follow from the roles.
type RolesDescription struct {
	NotStarted []string `json:"not_started,omitempty"`
	Running    []string `json:"running"`
	// Relocating and Restart are RolesBuilder.Relocating's, empty for a
	// table without a relocating state.
	Relocating string `json:"relocating,omitempty"`
	Restart    string `json:"restart,omitempty"`
	// Stopping and Stopped are RolesBuilder.Stopping's, empty for a table
	// without a stopping state.
	Stopping string `json:"stopping,omitempty"`
	Stopped  string `json:"stopped,omitempty"`
	Failed   string `json:"failed"`
	// Completed and Terminated are RolesBuilder.Ends', empty without.
	Completed  string                `json:"completed,omitempty"`
	Terminated string                `json:"terminated,omitempty"`
	Deadlines  []DeadlineDescription `json:"deadlines,omitempty"`
}

// DeadlineDescription is one deadline a table's roles give a state.
type DeadlineDescription struct {
	State string `json:"state"`
	// After is a Go duration ("10m0s").
	After string `json:"after"`
	Then  string `json:"then"`
}

// Describe returns the roles as data (see [RolesDescription]), the states
// in their table's order.
func (r *Roles[S]) Describe() RolesDescription {
	name := func(s S) string { n, _ := r.table.Name(s); return n }
	d := RolesDescription{Failed: name(r.failed)}
	for _, s := range r.table.States() {
		switch r.role[s] {
		case RoleNotStarted:
			d.NotStarted = append(d.NotStarted, name(s))
		case RoleRunning:
			d.Running = append(d.Running, name(s))
		}
		if dl, ok := r.deadlines[s]; ok {
			d.Deadlines = append(d.Deadlines, DeadlineDescription{State: name(s), After: dl.After.String(), Then: name(dl.Then)})
		}
	}
	if r.hasRelocate {
		d.Relocating, d.Restart = name(r.relocating), name(r.restart)
	}
	if r.hasStopping {
		d.Stopping, d.Stopped = name(r.stopping), name(r.stopped)
	}
	if r.hasEnds {
		d.Completed, d.Terminated = name(r.completed), name(r.terminated)
	}
	return d
}

// ErrInvalidRolesDescription is matched by the error [RebuildRoles]
// returns for a description no roles can be built from.
var ErrInvalidRolesDescription = errors.New("invalid roles description")

// RebuildRoles builds the roles d describes for table (rebuilt with
// transition.Rebuild from the description recorded beside them), checked
// as DefineRoles checks them. The error matches
// ErrInvalidRolesDescription, and ErrInvalidRoles when the roles do not
// fit the table.
func RebuildRoles(table *transition.Table[string], d RolesDescription) (*Roles[string], error) {
	if table == nil {
		return nil, fmt.Errorf("recovery: %w: no table", ErrInvalidRolesDescription)
	}
	b := DefineRoles(table).NotStarted(d.NotStarted...).Running(d.Running...).Failed(d.Failed)
	if d.Relocating != "" || d.Restart != "" {
		b.Relocating(d.Relocating, d.Restart)
	}
	if d.Stopping != "" || d.Stopped != "" {
		b.Stopping(d.Stopping, d.Stopped)
	}
	if d.Completed != "" || d.Terminated != "" {
		b.Ends(d.Completed, d.Terminated)
	}
	for _, dl := range d.Deadlines {
		after, err := time.ParseDuration(dl.After)
		if err != nil {
			return nil, fmt.Errorf("recovery: %w: deadline of %q: %v", ErrInvalidRolesDescription, dl.State, err)
		}
		b.Deadline(dl.State, after, dl.Then)
	}
	roles, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("recovery: %w: %w", ErrInvalidRolesDescription, err)
	}
	return roles, nil
}

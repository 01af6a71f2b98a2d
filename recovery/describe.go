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
	Parked     []string `json:"parked,omitempty"`
	// Relocating are RolesBuilder.Relocating's: each relocating state,
	// then where a relocation that does not say what it left goes.
	Relocating []EndDescription `json:"relocating,omitempty"`
	// Stopping are RolesBuilder.Stopping's: each drain, then its end;
	// the first is the stop an outside authority asks for.
	Stopping []EndDescription `json:"stopping,omitempty"`
	// Finishing are RolesBuilder.Finishing's: each state, then its end.
	Finishing []EndDescription `json:"finishing,omitempty"`
	Failed    string           `json:"failed"`
	// Completed and Terminated are RolesBuilder.Ends', empty without.
	Completed  string                `json:"completed,omitempty"`
	Terminated string                `json:"terminated,omitempty"`
	Deadlines  []DeadlineDescription `json:"deadlines,omitempty"`
}

// EndDescription is a state of a role that leads somewhere, and where: a
// relocation and its restart, a drain and its end, a finishing state and
// its end.
type EndDescription struct {
	State string `json:"state"`
	Then  string `json:"then"`
}

// DeadlineDescription is one deadline a table's roles give a state.
type DeadlineDescription struct {
	State string `json:"state"`
	// After is a Go duration ("10m0s").
	After string `json:"after"`
	Then  string `json:"then"`
}

// Describe returns the roles as data (see [RolesDescription]), the states
// in their table's order, the paths in the order given.
func (r *Roles[S]) Describe() RolesDescription {
	name := func(s S) string { n, _ := r.table.Name(s); return n }
	d := RolesDescription{Failed: name(r.failed)}
	for _, s := range r.table.States() {
		switch r.role[s] {
		case RoleNotStarted:
			d.NotStarted = append(d.NotStarted, name(s))
		case RoleRunning:
			d.Running = append(d.Running, name(s))
		case RoleParked:
			d.Parked = append(d.Parked, name(s))
		case RoleFinishing:
			d.Finishing = append(d.Finishing, EndDescription{State: name(s), Then: name(r.finishing[s])})
		}
		if dl, ok := r.deadlines[s]; ok {
			d.Deadlines = append(d.Deadlines, DeadlineDescription{State: name(s), After: dl.After.String(), Then: name(dl.Then)})
		}
	}
	for _, s := range r.relocating {
		d.Relocating = append(d.Relocating, EndDescription{State: name(s), Then: name(r.relocations[s])})
	}
	for _, s := range r.stopping {
		d.Stopping = append(d.Stopping, EndDescription{State: name(s), Then: name(r.stops[s])})
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
	b := DefineRoles(table).NotStarted(d.NotStarted...).Running(d.Running...).Parked(d.Parked...).Failed(d.Failed)
	for _, e := range d.Relocating {
		b.Relocating(e.State, e.Then)
	}
	for _, e := range d.Stopping {
		b.Stopping(e.State, e.Then)
	}
	for _, e := range d.Finishing {
		b.Finishing(e.State, e.Then)
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

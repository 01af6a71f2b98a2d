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
// controller does, timers and budgets included.
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
	Completed  string              `json:"completed,omitempty"`
	Terminated string              `json:"terminated,omitempty"`
	Timers     []TimerDescription  `json:"timers,omitempty"`
	Budgets    []BudgetDescription `json:"budgets,omitempty"`
	// Retain are RolesBuilder.Retain's, one per terminal state kept for
	// a while (a state missing is kept for ever).
	Retain []RetainDescription `json:"retain,omitempty"`
}

// RetainDescription is how long an execution that ended in State is
// kept, a Go duration ("" for zero: not kept at all).
type RetainDescription struct {
	State string `json:"state"`
	After string `json:"after,omitempty"`
}

// EndDescription is a state of a role that leads somewhere, and where: a
// relocation and its fallback, a drain and its end, a finishing state and
// its end.
type EndDescription struct {
	State string `json:"state"`
	Then  string `json:"then"`
}

// TimerDescription is a [Timer] as data; durations are Go durations
// ("10m0s").
type TimerDescription struct {
	State  string `json:"state"`
	After  string `json:"after,omitempty"`
	Since  string `json:"since,omitempty"`
	Budget string `json:"budget,omitempty"`
	Name   string `json:"name,omitempty"`
	Then   string `json:"then"`
}

// BudgetDescription is a [Budget] as data; durations are Go durations,
// Growth is fixed, linear or exponential.
type BudgetDescription struct {
	Counter   string `json:"counter"`
	Count     int    `json:"count"`
	Window    string `json:"window,omitempty"`
	Unlimited bool   `json:"unlimited,omitempty"`
	Initial   string `json:"backoff,omitempty"`
	Max       string `json:"backoff_max,omitempty"`
	Growth    string `json:"growth,omitempty"`
	Exhausted string `json:"exhausted"`
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
	for _, t := range r.timerOrder {
		d.Timers = append(d.Timers, TimerDescription{State: name(t.State), After: duration(t.After), Since: t.Since,
			Budget: t.Budget, Name: t.Name, Then: name(t.Then)})
	}
	for _, counter := range r.budgetOrder {
		b := r.budgets[counter]
		bd := BudgetDescription{Counter: counter, Count: b.Allowance.Count, Window: duration(b.Allowance.Window),
			Unlimited: b.Allowance.Unlimited, Initial: duration(b.Backoff.Initial), Max: duration(b.Backoff.Max),
			Exhausted: name(b.Exhausted)}
		if b.Backoff.Growth != GrowthFixed {
			bd.Growth = b.Backoff.Growth.String()
		}
		d.Budgets = append(d.Budgets, bd)
	}
	for _, s := range r.table.States() {
		if after, ok := r.retain[s]; ok {
			d.Retain = append(d.Retain, RetainDescription{State: name(s), After: duration(after)})
		}
	}
	return d
}

// duration is d as a description holds it: "" for none.
func duration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// durationField is a description's duration, its label for the error
// and where it goes.
type durationField struct {
	label, text string
	into        *time.Duration
}

// parseDurations reads a description's durations, "" as zero.
func parseDurations(what string, fields ...durationField) error {
	for _, f := range fields {
		if f.text == "" {
			*f.into = 0
			continue
		}
		d, err := time.ParseDuration(f.text)
		if err != nil {
			return fmt.Errorf("recovery: %w: %s %s: %v", ErrInvalidRolesDescription, what, f.label, err)
		}
		*f.into = d
	}
	return nil
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
	for _, td := range d.Timers {
		t := Timer[string]{State: td.State, Since: td.Since, Budget: td.Budget, Name: td.Name, Then: td.Then}
		if err := parseDurations(fmt.Sprintf("timer of %q", td.State), durationField{"after", td.After, &t.After}); err != nil {
			return nil, err
		}
		b.Timer(t)
	}
	for _, bd := range d.Budgets {
		budget := Budget[string]{Counter: bd.Counter, Allowance: Allowance{Count: bd.Count, Unlimited: bd.Unlimited}, Exhausted: bd.Exhausted}
		what := fmt.Sprintf("budget %q", bd.Counter)
		if err := parseDurations(what, durationField{"window", bd.Window, &budget.Allowance.Window},
			durationField{"backoff", bd.Initial, &budget.Backoff.Initial},
			durationField{"backoff_max", bd.Max, &budget.Backoff.Max}); err != nil {
			return nil, err
		}
		if bd.Growth != "" {
			g, err := ParseGrowth(bd.Growth)
			if err != nil {
				return nil, fmt.Errorf("recovery: %w: %s: growth %.32q, want fixed, linear or exponential", ErrInvalidRolesDescription, what, bd.Growth)
			}
			budget.Backoff.Growth = g
		}
		b.Budget(budget)
	}
	for _, rd := range d.Retain {
		var after time.Duration
		if err := parseDurations(fmt.Sprintf("retention of %q", rd.State), durationField{"after", rd.After, &after}); err != nil {
			return nil, err
		}
		b.Retain(after, rd.State)
	}
	roles, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("recovery: %w: %w", ErrInvalidRolesDescription, err)
	}
	return roles, nil
}

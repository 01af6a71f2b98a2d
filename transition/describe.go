package transition

import (
	"errors"
	"fmt"
	"strings"
)

// Description is a table as data, by the names its records store: what a
// store keeps beside the records so that a tool outside the controller's
// process (the operator's CLI, a metrics exporter, the next version of
// the controller) can rebuild the table from the store alone. Guards are
// code: a description says which moves a guard judges, and the rebuilt
// table has none.
type Description struct {
	// Initial is the state executions begin in.
	Initial string `json:"initial"`
	// States are every state, in the table's order.
	States []string `json:"states"`
	// Terminal are the states nothing follows.
	Terminal []string `json:"terminal,omitempty"`
	// Edges are the moves the table allows, return edges apart.
	Edges []Edge `json:"edges"`
	// Returns are the return edges (see Builder.Return): moves allowed
	// only back to the state the current one was entered from.
	Returns []Edge `json:"returns,omitempty"`
	// Guarded are the moves guards judge, return edges included.
	Guarded []Edge `json:"guarded,omitempty"`
	// Counted are the moves that add to a counter (see Builder.Count), so
	// that a tool writing through the rebuilt table counts them as the
	// controller does.
	Counted []CountedEdge `json:"counted,omitempty"`
	// Aliases are the other names records may carry for a state (see
	// Builder.Alias), so that a rebuilt table reads them too.
	Aliases []Alias `json:"aliases,omitempty"`
}

// Alias is another name a state is read from.
type Alias struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

// CountedEdge is a move that adds to a counter.
type CountedEdge struct {
	Counter string `json:"counter"`
	Edge
}

// Edge is one move, from a state to another, by their names.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func (e Edge) String() string { return e.From + " → " + e.To }

// Describe returns t as data (see [Description]).
func (t *Table[S]) Describe() Description {
	d := Description{States: make([]string, 0, t.n)}
	d.Initial, _ = t.Name(t.Initial())
	for i, from := range t.states {
		d.States = append(d.States, t.names[i])
		for _, name := range t.Aliases(from) {
			d.Aliases = append(d.Aliases, Alias{Name: name, State: t.names[i]})
		}
		if t.IsTerminal(from) {
			d.Terminal = append(d.Terminal, t.names[i])
		}
		for _, to := range t.Next(from) {
			name, _ := t.Name(to)
			e := Edge{From: t.names[i], To: name}
			if t.IsReturn(from, to) {
				d.Returns = append(d.Returns, e)
			} else {
				d.Edges = append(d.Edges, e)
			}
			if t.Guarded(from, to) {
				d.Guarded = append(d.Guarded, e)
			}
			for _, counter := range t.Counters(from, to) {
				d.Counted = append(d.Counted, CountedEdge{Counter: counter, Edge: e})
			}
		}
	}
	return d
}

// ErrInvalidDescription is matched by the error [Rebuild] returns for a
// description no table can be built from.
var ErrInvalidDescription = errors.New("invalid table description")

// Rebuild builds the table d describes, with the states' names as its
// states and no guards (a guarded move is allowed as any other: a tool
// that writes through a rebuilt table must not rely on the guard having
// run). Counted moves count as they do in the described table.
// Everything Build checks is checked; a description that names a
// state it does not list, or lists one twice, is refused too. The error
// matches ErrInvalidDescription, and ErrInvalidTable when Build refused.
func Rebuild(d Description) (*Table[string], error) {
	var problems []string
	known := make(map[string]bool, len(d.States))
	for _, s := range d.States {
		if known[s] {
			problems = append(problems, fmt.Sprintf("state %q listed twice", s))
		}
		known[s] = true
	}
	check := func(what, s string) {
		if !known[s] {
			problems = append(problems, fmt.Sprintf("%s %q is not a listed state", what, s))
		}
	}
	check("initial state", d.Initial)
	for _, s := range d.Terminal {
		check("terminal state", s)
	}
	counted := make([]Edge, len(d.Counted))
	for k, c := range d.Counted {
		counted[k] = c.Edge
	}
	for _, a := range d.Aliases {
		check(fmt.Sprintf("alias %q: state", a.Name), a.State)
	}
	for _, list := range [][]Edge{d.Edges, d.Returns, d.Guarded, counted} {
		for _, e := range list {
			check("edge "+e.String()+": state", e.From)
			check("edge "+e.String()+": state", e.To)
		}
	}
	allowed := make(map[Edge]bool, len(d.Edges)+len(d.Returns))
	for _, e := range append(append([]Edge(nil), d.Edges...), d.Returns...) {
		allowed[e] = true
	}
	for _, e := range d.Guarded {
		if !allowed[e] {
			problems = append(problems, fmt.Sprintf("guarded move %s is no edge", e))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("transition: %w: %s", ErrInvalidDescription, strings.Join(problems, "; "))
	}
	b := New(d.Initial).States(d.States...).Terminal(d.Terminal...)
	for _, e := range d.Edges {
		b.Allow(e.From, e.To)
	}
	for _, e := range d.Returns {
		b.Return(e.From, e.To)
	}
	for _, c := range d.Counted {
		b.Count(c.Counter, c.From, c.To)
	}
	for _, a := range d.Aliases {
		b.Alias(a.State, a.Name)
	}
	table, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("transition: %w: %w", ErrInvalidDescription, err)
	}
	return table, nil
}

package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
)

// Changes are how a table differs from the recorded one, by the states'
// names. Additions are safe under live records; everything in Removed and
// Changed could strand one or make a controller decide otherwise.
type Changes struct {
	AddedStates   []string
	AddedEdges    []transition.Edge // return edges included
	RemovedStates []string
	RemovedEdges  []transition.Edge // return edges included
	// Changed says, one line each, what else differs: the initial state,
	// a state that became or stopped being terminal, a state's role, the
	// state a role names (failed, a drain's end, a relocation's restart,
	// the stop an outside authority asks for, ...), an edge that became
	// or stopped being a return edge.
	Changed []string
	// Deadlines says which deadlines differ. They are policy, not
	// shape: a table that changes only them is compatible.
	Deadlines []string
}

// Same reports whether the tables are the same.
func (c Changes) Same() bool {
	return len(c.AddedStates)+len(c.AddedEdges)+len(c.RemovedStates)+len(c.RemovedEdges)+len(c.Changed)+len(c.Deadlines) == 0
}

// Compatible reports whether a table with these changes can replace the
// recorded one under live records: it only adds states and edges (and
// may change deadlines).
func (c Changes) Compatible() bool {
	return len(c.RemovedStates)+len(c.RemovedEdges)+len(c.Changed) == 0
}

// String lists the changes, one per line.
func (c Changes) String() string {
	var lines []string
	for _, s := range c.AddedStates {
		lines = append(lines, "status added: "+s)
	}
	for _, e := range c.AddedEdges {
		lines = append(lines, "move added: "+e.String())
	}
	for _, s := range c.RemovedStates {
		lines = append(lines, "status removed: "+s)
	}
	for _, e := range c.RemovedEdges {
		lines = append(lines, "move removed: "+e.String())
	}
	lines = append(lines, c.Changed...)
	lines = append(lines, c.Deadlines...)
	return strings.Join(lines, "\n")
}

// Compare returns how next differs from recorded.
func Compare(recorded, next Document) Changes {
	var c Changes
	was, is := recorded.Table, next.Table
	for _, s := range is.States {
		if !slices.Contains(was.States, s) {
			c.AddedStates = append(c.AddedStates, s)
		}
	}
	for _, s := range was.States {
		if !slices.Contains(is.States, s) {
			c.RemovedStates = append(c.RemovedStates, s)
		}
	}
	wasEdges, isEdges := edgeKinds(was), edgeKinds(is)
	for _, e := range edgeOrder(is) {
		if kind, ok := wasEdges[e]; !ok {
			c.AddedEdges = append(c.AddedEdges, e)
		} else if kind != isEdges[e] {
			c.Changed = append(c.Changed, fmt.Sprintf("move %s: was %s, is %s", e, kind, isEdges[e]))
		}
	}
	for _, e := range edgeOrder(was) {
		if _, ok := isEdges[e]; !ok {
			c.RemovedEdges = append(c.RemovedEdges, e)
		}
	}
	if was.Initial != is.Initial {
		c.Changed = append(c.Changed, fmt.Sprintf("initial status: was %s, is %s", was.Initial, is.Initial))
	}
	for _, s := range was.States {
		if !slices.Contains(is.States, s) {
			continue
		}
		if a, b := slices.Contains(was.Terminal, s), slices.Contains(is.Terminal, s); a != b {
			c.Changed = append(c.Changed, fmt.Sprintf("status %s: terminal was %t, is %t", s, a, b))
		}
		if a, b := roleOf(recorded, s), roleOf(next, s); a != b {
			c.Changed = append(c.Changed, fmt.Sprintf("status %s: role was %s, is %s", s, a, b))
		}
	}
	for _, paths := range []struct {
		what     string
		was, is  []recovery.EndDescription
		thenWhat string
	}{
		{"relocating", recorded.Roles.Relocating, next.Roles.Relocating, "restart"},
		{"stopping", recorded.Roles.Stopping, next.Roles.Stopping, "end"},
		{"finishing", recorded.Roles.Finishing, next.Roles.Finishing, "end"},
	} {
		// A path given for a state that had it not (a relocating state
		// added) is an addition, seen as the state's role; one whose
		// end moved is a change.
		for _, was := range paths.was {
			for _, is := range paths.is {
				if is.State == was.State && is.Then != was.Then {
					c.Changed = append(c.Changed, fmt.Sprintf("the %s of %s %s: was %s, is %s", paths.thenWhat, paths.what, was.State, was.Then, is.Then))
				}
			}
		}
	}
	if was, is := firstState(recorded.Roles.Stopping), firstState(next.Roles.Stopping); was != "" && was != is {
		c.Changed = append(c.Changed, fmt.Sprintf("the stop an outside authority asks for: was %s, is %s", was, orNone(is)))
	}
	for _, named := range []struct{ what, was, is string }{
		{"failed", recorded.Roles.Failed, next.Roles.Failed},
		{"completed", recorded.Roles.Completed, next.Roles.Completed},
		{"terminated", recorded.Roles.Terminated, next.Roles.Terminated},
	} {
		// A role given for the first time (a relocating state added) is
		// an addition; one taken away or moved is a change.
		if named.was != "" && named.was != named.is {
			c.Changed = append(c.Changed, fmt.Sprintf("the %s status: was %s, is %s", named.what, named.was, orNone(named.is)))
		}
	}
	wasDl, isDl := deadlines(recorded), deadlines(next)
	for _, s := range is.States {
		if !slices.Contains(was.States, s) {
			continue // an added state's deadline comes with the addition
		}
		if a, b := wasDl[s], isDl[s]; a != b {
			c.Deadlines = append(c.Deadlines, fmt.Sprintf("deadline of %s: was %s, is %s", s, orNone(a), orNone(b)))
		}
	}
	return c
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// edgeKinds maps every move of d to "an edge" or "a return edge".
func edgeKinds(d transition.Description) map[transition.Edge]string {
	kinds := make(map[transition.Edge]string, len(d.Edges)+len(d.Returns))
	for _, e := range d.Edges {
		kinds[e] = "an edge"
	}
	for _, e := range d.Returns {
		kinds[e] = "a return edge"
	}
	return kinds
}

// edgeOrder is every move of d, edges first, in the description's order.
func edgeOrder(d transition.Description) []transition.Edge {
	return append(append([]transition.Edge(nil), d.Edges...), d.Returns...)
}

// roleOf names the role the document gives s.
func roleOf(d Document, s string) string {
	switch {
	case slices.Contains(d.Roles.NotStarted, s):
		return "not started"
	case slices.Contains(d.Roles.Running, s):
		return "running"
	case slices.Contains(d.Roles.Parked, s):
		return "parked"
	case hasState(d.Roles.Relocating, s):
		return "relocating"
	case hasState(d.Roles.Stopping, s):
		return "stopping"
	case hasState(d.Roles.Finishing, s):
		return "finishing"
	case slices.Contains(d.Table.Terminal, s):
		return "terminal"
	}
	return "none"
}

// hasState reports whether one of paths is s's.
func hasState(paths []recovery.EndDescription, s string) bool {
	return slices.ContainsFunc(paths, func(e recovery.EndDescription) bool { return e.State == s })
}

// firstState is the first path's state, "" for none.
func firstState(paths []recovery.EndDescription) string {
	if len(paths) == 0 {
		return ""
	}
	return paths[0].State
}

// deadlines maps each state with a deadline of its own to "after → then".
func deadlines(d Document) map[string]string {
	out := make(map[string]string, len(d.Roles.Deadlines))
	for _, dl := range d.Roles.Deadlines {
		out[dl.State] = dl.After + " → " + dl.Then
	}
	return out
}

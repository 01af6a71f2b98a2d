package schema

import (
	"fmt"
	"maps"
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
	// state a role names (failed, a drain's end, a relocation's fallback,
	// the stop an outside authority asks for, ...), an edge that became
	// or stopped being a return edge.
	Changed []string
	// Policy says which timers, budgets and counted moves differ. They
	// are policy, not shape: a table that changes only them is
	// compatible.
	Policy []string
}

// Same reports whether the tables are the same.
func (c Changes) Same() bool {
	return len(c.AddedStates)+len(c.AddedEdges)+len(c.RemovedStates)+len(c.RemovedEdges)+len(c.Changed)+len(c.Policy) == 0
}

// Compatible reports whether a table with these changes can replace the
// recorded one under live records: it only adds states and edges (and
// may change timers, budgets and counts).
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
	lines = append(lines, c.Policy...)
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
	wasTimers, isTimers := timers(recorded), timers(next)
	for _, s := range is.States {
		if !slices.Contains(was.States, s) {
			continue // an added state's timers come with the addition
		}
		if a, b := wasTimers[s], isTimers[s]; a != b {
			c.Policy = append(c.Policy, fmt.Sprintf("timers of %s: were %s, are %s", s, orNone(a), orNone(b)))
		}
	}
	c.Policy = append(c.Policy, differ("budget", budgets(recorded), budgets(next))...)
	c.Policy = append(c.Policy, differ("count", counts(recorded), counts(next))...)
	return c
}

// differ says, in key order, what differs between was and is, a what each.
func differ(what string, was, is map[string]string) []string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(is)) {
		if a, b := was[k], is[k]; a != b {
			lines = append(lines, fmt.Sprintf("%s %s: was %s, is %s", what, k, orNone(a), orNone(b)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(was)) {
		if _, ok := is[k]; !ok {
			lines = append(lines, fmt.Sprintf("%s %s: was %s, is %s", what, k, was[k], orNone("")))
		}
	}
	return lines
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

// timers maps each state with timers of its own to what they say.
func timers(d Document) map[string]string {
	out := make(map[string]string, len(d.Roles.Timers))
	for _, t := range d.Roles.Timers {
		say := t.After
		if t.Since != "" {
			say += " since " + t.Since
		}
		if t.Budget != "" {
			say += " after " + t.Budget + "'s backoff"
		}
		if t.Name != "" {
			say += " (" + t.Name + ")"
		}
		say = strings.TrimSpace(say + " → " + t.Then)
		if out[t.State] != "" {
			say = out[t.State] + ", " + say
		}
		out[t.State] = say
	}
	return out
}

// budgets maps each budget's counter to what it allows.
func budgets(d Document) map[string]string {
	out := make(map[string]string, len(d.Roles.Budgets))
	for _, b := range d.Roles.Budgets {
		out[b.Counter] = fmt.Sprintf("%d within %s, unlimited %t, backoff %s to %s %s, then %s",
			b.Count, orNone(b.Window), b.Unlimited, orNone(b.Initial), orNone(b.Max), orNone(b.Growth), b.Exhausted)
	}
	return out
}

// counts maps each counter to the moves it counts.
func counts(d Document) map[string]string {
	out := map[string]string{}
	for _, c := range d.Table.Counted {
		if out[c.Counter] != "" {
			out[c.Counter] += ", "
		}
		out[c.Counter] += c.Edge.String()
	}
	return out
}

package state

import (
	"iter"
	"math/bits"
	"strings"
)

// Set is a set of statuses, one bit per status. The zero value is the
// empty set; sets are values, so they compare with == and need no locking.
type Set uint32

// The named sets. They partition [All] into init, running and terminal
// statuses; [FailedStatuses] is the part of the terminal ones that did not
// end well.
const (
	// InitStatuses: the execution exists but no controller works on it
	// yet (pending, scheduling, initializing).
	InitStatuses = Set(1<<Pending | 1<<Scheduling | 1<<Initializing)

	// RunningStatuses: a controller drives, or should drive, the
	// execution (running, recovering, relocating, failing, paused,
	// stopping). Teraslice's list plus relocating: a relocating execution
	// is alive, only moving, and every check of "is it still running"
	// must say yes.
	RunningStatuses = Set(1<<Running | 1<<Recovering | 1<<Relocating | 1<<Failing | 1<<Paused | 1<<Stopping)

	// TerminalStatuses: final statuses with no way out (completed,
	// stopped, rejected, failed, terminated).
	TerminalStatuses = Set(1<<Completed | 1<<Stopped | 1<<Rejected | 1<<Failed | 1<<Terminated)

	// FailedStatuses: terminal statuses that did not end well (rejected,
	// failed, terminated). Stopped is not among them: somebody asked.
	FailedStatuses = Set(1<<Rejected | 1<<Failed | 1<<Terminated)

	// All holds every valid status.
	All = InitStatuses | RunningStatuses | TerminalStatuses
)

// Of returns the set holding the given statuses; invalid values are left
// out, so a Set never holds a non-status.
func Of(statuses ...Status) Set {
	var s Set
	for _, st := range statuses {
		if st.Valid() {
			s |= 1 << st
		}
	}
	return s
}

// Has reports whether st is in s.
func (s Set) Has(st Status) bool { return st.Valid() && s&(1<<st) != 0 }

// Union returns the statuses in s or o.
func (s Set) Union(o Set) Set { return s | o }

// Minus returns the statuses in s but not in o.
func (s Set) Minus(o Set) Set { return s &^ o }

// Intersect returns the statuses in both s and o.
func (s Set) Intersect(o Set) Set { return s & o }

// Len returns the number of statuses in s.
func (s Set) Len() int { return bits.OnesCount32(uint32(s & All)) }

// All yields the statuses of s in declaration (lifecycle) order.
func (s Set) All() iter.Seq[Status] {
	return func(yield func(Status) bool) {
		for rest := uint32(s & All); rest != 0; rest &= rest - 1 {
			if !yield(Status(bits.TrailingZeros32(rest))) {
				return
			}
		}
	}
}

// String returns the members in lifecycle order, like "{running, paused}".
func (s Set) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for st := range s.All() {
		if b.Len() > 1 {
			b.WriteString(", ")
		}
		b.WriteString(st.String())
	}
	b.WriteByte('}')
	return b.String()
}

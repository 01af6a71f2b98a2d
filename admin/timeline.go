package admin

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

// A timeline is an execution's audit trail as its page shows it: newest
// first, each change with when it happened (relative to the page, exact
// on hover), how long the execution stayed in the status it entered, and
// the revision it wrote (storage.Record.Written, the one a stop
// reports). The writes that change neither the status nor the owner (a
// controller's progress: "running (same status)") fold into the change
// they follow, so that a stop is never pushed out of sight by them; a
// take-over, which changes the owner, is a change of its own.

// step is one row of a timeline.
type step struct {
	Move, By, Reason, Class string
	At                      string // RFC 3339, exact
	Ago                     string // "3 min ago"
	Revision                uint64 // the revision it wrote
	// Stayed is how long the execution stayed in the status the change
	// entered, until the next status change, or "for 2 h so far" for the
	// current one unless it has ended; empty for a change that kept the
	// status.
	Stayed string
	// Progress are the writes folded into this change, newest first.
	Progress []step

	at time.Time
}

// timeline builds rec's timeline, newest first, as of now.
func timeline(rec storage.Record, table *schema.Document, class func(*schema.Document, string) string, now time.Time) []step {
	entries := rec.History.Entries()
	wrote := rec.Written()
	var steps []step // oldest first while built
	lastMove := -1   // the step of the last status change
	for k, e := range entries {
		s := step{At: when(e.At), Ago: ago(now.Sub(e.At)), Move: moveOf(e), By: byOf(e), Reason: e.Reason,
			Class: class(table, e.To), Revision: wrote[k], at: e.At}
		if k > 0 && e.From == e.To && sameClaim(e, entries[k-1]) && len(steps) > 0 {
			last := &steps[len(steps)-1]
			last.Progress = append([]step{s}, last.Progress...)
			continue
		}
		if e.From != e.To {
			if lastMove >= 0 {
				steps[lastMove].Stayed = "for " + span(e.At.Sub(steps[lastMove].at))
			}
			lastMove = len(steps)
		}
		steps = append(steps, s)
	}
	if lastMove >= 0 && (table == nil || !slices.Contains(table.Table.Terminal, rec.Status)) {
		steps[lastMove].Stayed = "for " + span(now.Sub(steps[lastMove].at)) + " so far"
	}
	for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
		steps[i], steps[j] = steps[j], steps[i]
	}
	return steps
}

// sameClaim reports whether two entries were written under one claim.
func sameClaim(a, b storage.Entry) bool { return a.Owner == b.Owner && a.Epoch == b.Epoch }

func moveOf(e storage.Entry) string {
	switch {
	case e.From == "":
		return "created in " + e.To
	case e.From == e.To:
		return e.To + " (same status)"
	}
	return e.From + " → " + e.To
}

func byOf(e storage.Entry) string {
	if e.Owner != "" {
		return fmt.Sprintf("%s (%s@%d)", e.Actor, e.Owner, e.Epoch)
	}
	return orDash(e.Actor)
}

// ago says how long ago something d old happened, to the minute.
func ago(d time.Duration) string {
	if d < time.Minute {
		return "just now"
	}
	return span(d) + " ago"
}

// span says a duration as people read it: the two largest units.
func span(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		return units(int(d/time.Minute), "min", int(d%time.Minute/time.Second), "s")
	case d < 24*time.Hour:
		return units(int(d/time.Hour), "h", int(d%time.Hour/time.Minute), "min")
	}
	return units(int(d/(24*time.Hour)), "d", int(d%(24*time.Hour)/time.Hour), "h")
}

func units(big int, bigUnit string, small int, smallUnit string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", big, bigUnit)
	if small > 0 {
		fmt.Fprintf(&b, " %d %s", small, smallUnit)
	}
	return b.String()
}

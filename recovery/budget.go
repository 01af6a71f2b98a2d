package recovery

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Budget limits the moves a counter of the table counts
// ([transition.Builder.Count]): a job's restarts (Volcano's maxRetry), its
// submissions, its preemptions kept apart from its failures. Each budget
// has its own allowance and backoff, and the record keeps what it spent,
// so every controller, restarted or not, honours it:
//
//   - Exhausted: once an execution is in a state the counted moves enter
//     (Restarting) and has spent more than the allowance, it moves to
//     Exhausted, the end the user names ([Startup], [Decider.Advance] and
//     the [Reaper] write it).
//   - Backoff: the next step is not due before the last counted move plus
//     the backoff for the moves spent; a [Timer] with Budget set waits for
//     it, and [Roles.Spending] says when that is.
//
// A move the table does not count spends nothing: a move into a
// disruption state spends no failure budget unless the table counts it.
type Budget[S comparable] struct {
	// Counter is the table's counter the budget limits.
	Counter string
	// Allowance is how many counted moves are allowed (within its
	// Window); the one past it exhausts the budget. The zero Allowance
	// allows none: Volcano's maxRetry m allows m-1 restarts. An execution
	// may carry its own count under LimitKey(Counter).
	Allowance Allowance
	// Backoff is how long after a counted move the next step waits; the
	// zero Backoff waits for nothing.
	Backoff Backoff
	// Exhausted is where an exhausted budget moves an execution: a
	// terminal, not-started or parked state every state the counted moves
	// enter can move to.
	Exhausted S
}

// Growth is how a [Backoff] grows with the moves spent.
type Growth uint8

// The growths of a backoff.
const (
	GrowthFixed       Growth = iota // Initial after every move
	GrowthLinear                    // Initial times the moves spent
	GrowthExponential               // Initial doubled for every move spent past the first
)

func (g Growth) String() string {
	switch g {
	case GrowthFixed:
		return "fixed"
	case GrowthLinear:
		return "linear"
	case GrowthExponential:
		return "exponential"
	}
	return fmt.Sprintf("Growth(%d)", uint8(g))
}

// ParseGrowth is the Growth String names.
func ParseGrowth(s string) (Growth, error) {
	for _, g := range []Growth{GrowthFixed, GrowthLinear, GrowthExponential} {
		if g.String() == s {
			return g, nil
		}
	}
	return 0, fmt.Errorf("recovery: %w: growth %.32q, want fixed, linear or exponential", ErrInvalidPolicy, s)
}

// Backoff is how long a step waits after the moves a budget spent:
// Initial after the first, growing as Growth says, never more than Max
// (zero: no cap). Kubernetes Job's pod failure backoff is
// {10s, 6m, GrowthExponential}.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Growth  Growth
}

// After returns how long to wait after the spent-th counted move (none:
// zero).
func (b Backoff) After(spent int) time.Duration {
	if spent <= 0 || b.Initial <= 0 {
		return 0
	}
	limit := b.Max
	if limit <= 0 {
		limit = math.MaxInt64
	}
	d := b.Initial
	switch b.Growth {
	case GrowthLinear:
		if int64(spent) > int64(limit/b.Initial) {
			return limit
		}
		d = b.Initial * time.Duration(spent)
	case GrowthExponential:
		for range spent - 1 {
			if d > limit/2 {
				return limit
			}
			d *= 2
		}
	}
	return min(d, limit)
}

func (b Backoff) check() string {
	switch {
	case b.Initial < 0 || b.Max < 0:
		return fmt.Sprintf("backoff %v, at most %v: negative", b.Initial, b.Max)
	case b.Max > 0 && b.Max < b.Initial:
		return fmt.Sprintf("backoff Max %v is less than Initial %v", b.Max, b.Initial)
	case b.Growth > GrowthExponential:
		return fmt.Sprintf("backoff growth %v is none of fixed, linear or exponential", b.Growth)
	}
	return ""
}

// String says the backoff as people read it: "10s doubling to 6m0s".
func (b Backoff) String() string {
	if b.Initial == 0 {
		return "none"
	}
	s := b.Initial.String()
	switch b.Growth {
	case GrowthLinear:
		s += " growing linearly"
	case GrowthExponential:
		s += " doubling"
	}
	if b.Max > 0 {
		s += " to " + b.Max.String()
	}
	return s
}

// limitKeyPrefix starts the metadata key of an execution's own limit.
const limitKeyPrefix = "execfsm.limit."

// LimitKey is the record metadata key under which an execution carries
// its own allowance count for counter's budget, a decimal integer that
// replaces the budget's Allowance.Count (and makes an unlimited one
// limited): a limit from the job's spec, as Volcano's maxRetry is.
func LimitKey(counter string) string { return limitKeyPrefix + counter }

// Spending is what an execution has spent of a budget, at some time.
type Spending struct {
	Counter string
	// Spent is the counted moves within the allowance's window (all of
	// them without one).
	Spent int
	// Allowance is the budget's, or the execution's own (LimitKey).
	Allowance Allowance
	// Exhausted: Spent is more than Allowance allows.
	Exhausted bool
	// NotBefore is when the next step is due: the last counted move plus
	// the backoff for Spent. Zero when nothing needs to wait.
	NotBefore time.Time
	// Last is the time of the last counted move (zero if none).
	Last time.Time
}

// Left is how many more counted moves the allowance allows (-1:
// unlimited; 0 when exhausted).
func (s Spending) Left() int {
	if s.Allowance.Unlimited {
		return -1
	}
	return max(0, s.Allowance.Count-s.Spent)
}

// Spending returns what rec has spent of counter's budget at now. The
// error is for a counter without a budget, or a record whose count or
// own limit does not read (storage.ErrInvalidRecord).
func (r *Roles[S]) Spending(rec storage.Record, counter string, now time.Time) (Spending, error) {
	b, ok := r.budgets[counter]
	if !ok {
		return Spending{}, fmt.Errorf("recovery: %w: no budget for counter %.64q", ErrInvalidPolicy, counter)
	}
	return spending(b, rec, now)
}

func spending[S comparable](b Budget[S], rec storage.Record, now time.Time) (Spending, error) {
	s := Spending{Counter: b.Counter, Allowance: b.Allowance}
	if v, ok := rec.Meta[LimitKey(b.Counter)]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("recovery: %w: metadata %s=%.32q is not a count", storage.ErrInvalidRecord, LimitKey(b.Counter), v)
		}
		s.Allowance.Count, s.Allowance.Unlimited = n, false
	}
	c, err := transition.CountOf(rec, b.Counter)
	if err != nil {
		return s, err
	}
	var cutoff time.Time
	if s.Allowance.Window > 0 {
		cutoff = now.Add(-s.Allowance.Window)
	}
	s.Spent = c.Since(cutoff)
	s.Exhausted = !s.Allowance.Unlimited && s.Spent > s.Allowance.Count
	if last, ok := c.Last(); ok {
		s.Last = last
		if wait := b.Backoff.After(s.Spent); wait > 0 {
			s.NotBefore = last.Add(wait)
		}
	}
	return s, nil
}

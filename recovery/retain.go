package recovery

import (
	"time"
)

// retention is one Retain: how long executions that ended in states
// (every terminal state not named by another Retain, if none) are kept.
type retention[S comparable] struct {
	after  time.Duration
	states []S
}

// Retain says how long an execution that ended is kept in the store
// before a [Retirer] deletes it: after it has been in its terminal state
// that long. Name terminal states to keep them for their own time (keep
// failed executions longer than completed ones, for their post-mortem);
// with none named, after applies to every terminal state no other
// Retain names. A terminal state no Retain covers is kept for ever, as
// every execution is when the roles say nothing; a zero keeps nothing:
// the execution is retired as soon as it has ended.
//
// Only terminal states are retired: a parked state (a failed job that
// waits for its spec to change) has not ended. Build reports a state
// named that is not terminal, one named twice, two Retains naming none,
// and a negative after.
func (b *RolesBuilder[S]) Retain(after time.Duration, states ...S) *RolesBuilder[S] {
	b.retains = append(b.retains, retention[S]{after: after, states: states})
	return b
}

// Retention returns how long an execution that ended in s is kept, and
// false when it is kept for ever (s has no retention, or is not
// terminal).
func (r *Roles[S]) Retention(s S) (time.Duration, bool) {
	after, ok := r.retain[s]
	return after, ok
}

// retention checks the Retains and fills in r.retain.
func (c *rolesCheck[S]) retention() {
	r := &c.r
	r.retain = map[S]time.Duration{}
	var rest []time.Duration
	for _, ret := range c.b.retains {
		if ret.after < 0 {
			c.add("Retain %v is negative: want how long an ended execution is kept (zero keeps none)", ret.after)
		}
		if len(ret.states) == 0 {
			rest = append(rest, ret.after)
			continue
		}
		for _, s := range ret.states {
			role, known := r.role[s]
			_, twice := r.retain[s]
			switch {
			case !known:
				c.add("Retain for %s, not a state of the table", c.name(s))
			case role != RoleTerminal:
				c.add("Retain for %s, a %s state: only an execution that has ended (a terminal state) is retired", c.name(s), role)
			case twice:
				c.add("Retain for %s is given twice", c.name(s))
			default:
				r.retain[s] = ret.after
			}
		}
	}
	if len(rest) > 1 {
		c.add("Retain without states is given %d times (%v): once says how long every other ended execution is kept", len(rest), rest)
	}
	if len(rest) == 0 {
		return
	}
	for _, s := range c.t.States() {
		if _, named := r.retain[s]; !named && r.role[s] == RoleTerminal {
			r.retain[s] = rest[0]
		}
	}
}

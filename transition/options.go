package transition

import (
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// Option configures a [Machine] or a [Persisted]. Options that only make
// sense for one of them make the other's constructor return an error, so
// a misplaced option is never silently ignored.
type Option interface {
	apply(*settings)
}

// Where an option applies.
const (
	forMachine = 1 << iota
	forPersisted
)

type settings struct {
	target    int
	errs      []error
	observers []any // func(Change[S]) for the constructor's S
	start     any   // S
	hasStart  bool
	clock     func() time.Time
	actor     string
	id        string
	history   int
	retries   int
}

type optionFunc struct {
	name  string
	where int
	fn    func(*settings)
}

func (o optionFunc) apply(s *settings) {
	if o.where&s.target == 0 {
		kind := "Machine"
		if s.target == forPersisted {
			kind = "Persisted"
		}
		s.errs = append(s.errs, fmt.Errorf("transition: option %s does not apply to a %s", o.name, kind))
		return
	}
	o.fn(s)
}

// OnChange adds an observer called after every successful change, for
// logging (log/slog), metrics or an audit sink. Observers of one Machine
// or Persisted see every change it made exactly once, in the order the
// changes were written, one at a time, in the order they were added.
//
// No lock is held while an observer runs, so an observer may call back
// into the machine that called it: that change is delivered after the
// current one, once the observer returns. It follows that Fire may return
// before observers have seen its change, when another goroutine (or an
// observer up the stack) is delivering; they will see it.
func OnChange[S comparable](fn func(Change[S])) Option {
	return optionFunc{"OnChange", forMachine | forPersisted, func(s *settings) {
		if fn == nil {
			s.errs = append(s.errs, fmt.Errorf("transition: OnChange: nil observer"))
			return
		}
		s.observers = append(s.observers, fn)
	}}
}

// StartIn makes a Machine begin in s instead of the table's initial
// state, for a machine rebuilt from a state read elsewhere. It remembers
// no earlier state, so return edges out of s are closed until it moves.
func StartIn[S comparable](s S) Option {
	return optionFunc{"StartIn", forMachine, func(st *settings) {
		st.start, st.hasStart = s, true
	}}
}

// Clock sets the time source for Change.At and Record.UpdatedAt; tests
// pass a fake. The default is time.Now.
func Clock(now func() time.Time) Option {
	return optionFunc{"Clock", forMachine | forPersisted, func(s *settings) {
		if now == nil {
			s.errs = append(s.errs, fmt.Errorf("transition: Clock: nil function"))
			return
		}
		s.clock = now
	}}
}

// Actor names who makes the changes ("cluster-master", a pod name); it is
// recorded in every Change and audit entry.
func Actor(name string) Option {
	return optionFunc{"Actor", forMachine | forPersisted, func(s *settings) {
		if len(name) > storage.MaxOwnerLen {
			s.errs = append(s.errs, fmt.Errorf("transition: Actor: %d bytes, at most %d", len(name), storage.MaxOwnerLen))
			return
		}
		s.actor = name
	}}
}

// ID names the execution a Machine stands for, reported in its changes and
// errors. A Persisted takes its id as an argument.
func ID(id string) Option {
	return optionFunc{"ID", forMachine, func(s *settings) { s.id = id }}
}

// History sets how many recent changes the audit trail of a record this
// Persisted creates keeps (default [storage.DefaultHistoryLimit], 1 to
// [storage.MaxHistory]). The length is the record's ([storage.Record.HistoryLimit]): every
// writer keeps it, whatever its own option says.
func History(n int) Option {
	return optionFunc{"History", forPersisted, func(s *settings) {
		if n < 1 || n > storage.MaxHistory {
			s.errs = append(s.errs, fmt.Errorf("transition: History(%d): want 1 to %d", n, storage.MaxHistory))
			return
		}
		s.history = n
	}}
}

// Retries sets how many times a write that lost a race re-reads the record
// and decides again before giving up with [storage.ErrConflict] (default 8).
func Retries(n int) Option {
	return optionFunc{"Retries", forPersisted, func(s *settings) {
		if n < 0 || n > 1000 {
			s.errs = append(s.errs, fmt.Errorf("transition: Retries(%d): want 0 to 1000", n))
			return
		}
		s.retries = n
	}}
}

func newSettings(target int, opts []Option) *settings {
	s := &settings{target: target, clock: time.Now, history: storage.DefaultHistoryLimit, retries: 8}
	for _, o := range opts {
		if o == nil {
			s.errs = append(s.errs, fmt.Errorf("transition: nil Option"))
			continue
		}
		o.apply(s)
	}
	return s
}

// observersFor converts the collected observers to the constructor's
// state type; an observer written for another state type is an error.
func observersFor[S comparable](s *settings) ([]func(Change[S]), error) {
	var out []func(Change[S])
	for _, o := range s.observers {
		fn, ok := o.(func(Change[S]))
		if !ok {
			var zero S
			return nil, fmt.Errorf("transition: OnChange observer %T does not take Change[%T]", o, zero)
		}
		out = append(out, fn)
	}
	return out, nil
}

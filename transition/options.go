package transition

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// DefaultRetries is how many times a Persisted write that lost a race
// re-reads the record and decides again when PersistedOptions.Retries is
// zero.
const DefaultRetries = 8

// MaxRetries bounds PersistedOptions.Retries.
const MaxRetries = 1000

// NoRetries, as PersistedOptions.Retries, makes a write that lost a race
// fail at once with storage.ErrConflict.
const NoRetries = -1

// MachineOptions configure a [Machine]. The zero value is the defaults;
// [NewMachine] refuses values it cannot honour.
type MachineOptions struct {
	// ID names the execution the machine stands for, reported in its
	// changes and errors.
	ID string
	// Actor names who makes the changes ("cluster-master", a pod name);
	// it is recorded in every Change. At most storage.MaxOwnerLen bytes.
	Actor string
	// Clock is the time source for Change.At; nil is time.Now. Tests
	// pass a fake.
	Clock func() time.Time
}

// PersistedOptions configure a [Persisted]. The zero value is the
// defaults; [NewPersisted] refuses values it cannot honour.
type PersistedOptions struct {
	// Actor names who makes the changes; it is recorded in every Change
	// and audit entry. At most storage.MaxOwnerLen bytes.
	Actor string
	// Clock is the time source for Change.At and Record.UpdatedAt; nil is
	// time.Now.
	Clock func() time.Time
	// History is how many recent changes the audit trail of a record
	// this Persisted creates keeps: 0 is storage.DefaultHistoryLimit, at
	// most storage.MaxHistory. The length is the record's
	// (storage.Record.HistoryLimit): every writer keeps it, whatever its
	// own options say.
	History int
	// Retries is how many times a write that lost a race re-reads the
	// record and decides again before giving up with storage.ErrConflict:
	// 0 is DefaultRetries, NoRetries none, at most MaxRetries.
	Retries int
}

type settings[S comparable] struct {
	id        string
	actor     string
	clock     func() time.Time
	observers []func(Change[S])
	failures  []func(Failure[S])
	onPanic   func(Change[S], any)
	history   int
	retries   int
	tracer    Tracer[S]
}

func checkCommon[S comparable](ctor, actor string, observers []func(Change[S]), failures []func(Failure[S])) []error {
	var errs []error
	if len(actor) > storage.MaxOwnerLen {
		errs = append(errs, fmt.Errorf("transition: %s: Actor is %d bytes, at most %d", ctor, len(actor), storage.MaxOwnerLen))
	}
	for k, o := range observers {
		if o == nil {
			errs = append(errs, fmt.Errorf("transition: %s: OnChange[%d] is nil", ctor, k))
		}
	}
	for k, o := range failures {
		if o == nil {
			errs = append(errs, fmt.Errorf("transition: %s: OnFailure[%d] is nil", ctor, k))
		}
	}
	return errs
}

// Observers are told of a Machine's or a Persisted's changes and failed
// moves (see Observers in the package documentation). They are given to
// NewMachine, NewMachineAt or NewPersisted after the options, any number
// of them (a metrics adapter's, a log's): their functions are called in
// the order given. The zero value tells nobody.
type Observers[S comparable] struct {
	// OnChange are called after every successful change (for a
	// Persisted, every write, creation included).
	OnChange []func(Change[S])
	// OnFailure are called after every Fire or Apply that returns an
	// error, on the caller's goroutine before it returns (see [Failure]);
	// for a Persisted, a conflict that a retry resolved is not a failure.
	OnFailure []func(Failure[S])
	// OnObserverPanic is told of an observer (OnChange or OnFailure) that
	// panicked; when no Observers given has one, the panic is logged,
	// with its stack, through log/slog's default logger.
	OnObserverPanic func(c Change[S], recovered any)
	// Tracer, if set, follows a Persisted's writes into a tracing system
	// (see [Tracer]); a Machine has none to follow.
	Tracer Tracer[S]
}

// merge joins observer bundles into one, in order.
func merge[S comparable](all []Observers[S]) Observers[S] {
	var out Observers[S]
	var onPanic []func(Change[S], any)
	var traced []Tracer[S]
	for _, o := range all {
		if o.Tracer != nil {
			traced = append(traced, o.Tracer)
		}
		out.OnChange = append(out.OnChange, o.OnChange...)
		out.OnFailure = append(out.OnFailure, o.OnFailure...)
		if o.OnObserverPanic != nil {
			onPanic = append(onPanic, o.OnObserverPanic)
		}
	}
	out.Tracer = tracerOf(traced)
	if len(onPanic) > 0 {
		out.OnObserverPanic = func(c Change[S], recovered any) {
			for _, h := range onPanic {
				h(c, recovered)
			}
		}
	}
	return out
}

func machineSettings[S comparable](o MachineOptions, observers []Observers[S]) (settings[S], error) {
	obs := merge(observers)
	errs := checkCommon("NewMachine", o.Actor, obs.OnChange, obs.OnFailure)
	s := settings[S]{id: o.ID, actor: o.Actor, clock: o.Clock, observers: obs.OnChange, failures: obs.OnFailure, onPanic: obs.OnObserverPanic}
	return s.withDefaults(), errors.Join(errs...)
}

func persistedSettings[S comparable](o PersistedOptions, observers []Observers[S]) (settings[S], error) {
	obs := merge(observers)
	errs := checkCommon("NewPersisted", o.Actor, obs.OnChange, obs.OnFailure)
	if o.History < 0 || o.History > storage.MaxHistory {
		errs = append(errs, fmt.Errorf("transition: NewPersisted: History %d, want 0 (the default, %d) to %d", o.History, storage.DefaultHistoryLimit, storage.MaxHistory))
	}
	if o.Retries < NoRetries || o.Retries > MaxRetries {
		errs = append(errs, fmt.Errorf("transition: NewPersisted: Retries %d, want NoRetries, 0 (the default, %d) or 1 to %d", o.Retries, DefaultRetries, MaxRetries))
	}
	s := settings[S]{actor: o.Actor, clock: o.Clock, observers: obs.OnChange, failures: obs.OnFailure, onPanic: obs.OnObserverPanic,
		history: o.History, retries: o.Retries, tracer: obs.Tracer}
	if s.history == 0 {
		s.history = storage.DefaultHistoryLimit
	}
	switch s.retries {
	case 0:
		s.retries = DefaultRetries
	case NoRetries:
		s.retries = 0
	}
	return s.withDefaults(), errors.Join(errs...)
}

func (s settings[S]) withDefaults() settings[S] {
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.onPanic == nil {
		s.onPanic = func(c Change[S], recovered any) {
			// Called from the deferred recover, so the stack is still the
			// panicking observer's.
			slog.Error("transition: an observer panicked; the change stands and the other observers saw it",
				"id", c.ID, "from", fmt.Sprint(c.From), "to", fmt.Sprint(c.To), "revision", c.Revision,
				"panic", fmt.Sprint(recovered), "stack", string(debug.Stack()))
		}
	}
	return s
}

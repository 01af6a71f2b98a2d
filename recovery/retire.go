package recovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/execfsm/execfsm/internal/nilstore"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/storage"
)

// Retirer deletes the executions that ended longer ago than the roles
// keep them ([RolesBuilder.Retain]), so that a fleet that runs for years
// keeps in its store what it runs, not everything it ever ran. Beside
// the [Reaper], one per fleet is enough; several are safe: every delete
// is a compare-and-swap at the revision the Retirer read, never made
// under a live holder, so two Retirers never delete what moved on, and
// the slower one skips what the faster one took.
//
// A pass ([Retirer.Retire]) lists the store, and deletes what is due in
// batches of RetirerOptions.Batch: each batch is first handed to the
// Archive, if one is given (a failing archive stops the pass, having
// deleted nothing it did not keep), then deleted record by record, and
// the Retirer pauses between batches, so that the controllers' own
// writes go on beside it. [Retirer.Run] makes passes until its context
// ends.
//
// Make one with [Decider.NewRetirer].
type Retirer[S comparable] struct {
	roles    *Roles[S]
	lister   storage.Lister     // nil when pages is set
	pages    storage.PageLister // nil when the store lists only whole
	deleter  storage.Deleter
	clock    reconcile.Clock
	archive  storage.Archive
	batch    int
	pause    time.Duration
	keep     func(storage.Record) bool
	observer Observer[S]
}

// RetirerOptions are a [Retirer]'s settings; the retentions are the
// roles', and the observer the Decider's.
type RetirerOptions struct {
	// Clock is nil for the system clock.
	Clock reconcile.Clock
	// Archive, if set, keeps every record, with its trail, before it is
	// deleted (archive.File is a JSON Lines file); nil deletes without
	// keeping.
	Archive storage.Archive
	// Batch is how many records are archived together and deleted
	// before the Retirer pauses: 1 or more (100 suits every store of
	// this module; a zero retires nothing, so it is refused).
	Batch int
	// Pause is how long the Retirer waits between batches; zero waits
	// not at all.
	Pause time.Duration
	// Keep, if set, is asked about every record due, and a record it
	// keeps is left for the next pass. A manager that creates a record
	// for every item its world lists (run.ManagerConfig.CreateMissing)
	// must keep the records of items the world still lists: retired,
	// they would be created again, and their work run again.
	Keep func(rec storage.Record) bool
}

// RetireReport is what one pass of a [Retirer] did.
type RetireReport struct {
	// Retired counts the records deleted (and archived).
	Retired int
	// Skipped counts the records due that were not deleted: moved on,
	// held, or deleted by another Retirer since they were listed. The
	// next pass looks at them again.
	Skipped int
	// Kept counts the ended records not yet due, or kept by Keep.
	Kept int
	// Unreadable counts the records the store could not read, and
	// records of another table: left as they are.
	Unreadable int
	// NextDue is when the first record kept falls due; zero if none
	// (Keep's are not counted).
	NextDue time.Time
}

// newRetirer is [Decider.NewRetirer].
func newRetirer[S comparable](roles *Roles[S], store storage.Store, opts RetirerOptions, observer Observer[S]) (*Retirer[S], error) {
	if nilstore.Is(store) {
		return nil, errors.New("recovery: NewRetirer: nil store")
	}
	lister, canList := store.(storage.Lister)
	pages, canPage := store.(storage.PageLister)
	deleter, canDelete := store.(storage.Deleter)
	var errs []error
	if !(canList || canPage) || !canDelete {
		errs = append(errs, fmt.Errorf("recovery: NewRetirer: %w: %T must implement storage.Deleter and storage.PageLister (or storage.Lister)", errors.ErrUnsupported, store))
	}
	if canPage {
		lister = nil
	}
	if opts.Batch < 1 {
		errs = append(errs, fmt.Errorf("recovery: NewRetirer: %w: Batch %d: want how many records a batch deletes, 1 or more", ErrInvalidPolicy, opts.Batch))
	}
	if opts.Pause < 0 {
		errs = append(errs, fmt.Errorf("recovery: NewRetirer: %w: Pause %v is negative", ErrInvalidPolicy, opts.Pause))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	clock := opts.Clock
	if clock == nil {
		clock = reconcile.SystemClock()
	}
	return &Retirer[S]{roles: roles, lister: lister, pages: pages, deleter: deleter, clock: clock, archive: opts.Archive,
		batch: opts.Batch, pause: opts.Pause, keep: opts.Keep, observer: observer}, nil
}

// NewRetirer returns the Retirer of the executions store keeps, deleting
// those past the roles' retention; see [Retirer]. The store must
// implement [storage.Deleter], and [storage.PageLister] (every store of
// this module does: a pass then reads the ended executions of the
// statuses retained, a page at a time, and none of the live ones) or
// [storage.Lister] (a pass then reads the whole store); an error
// matching errors.ErrUnsupported otherwise.
func (d *Decider[S]) NewRetirer(store storage.Store, opts RetirerOptions) (*Retirer[S], error) {
	if d == nil || d.roles == nil {
		return nil, errZeroDecider
	}
	return newRetirer(d.roles, store, opts, d.p.Observer)
}

// errZeroRetirer is what the methods of a zero Retirer return.
var errZeroRetirer = errors.New("recovery: Retirer: make one with Decider.NewRetirer")

// Retire makes one pass: it deletes every execution due, as
// [Retirer] says, and returns what it did. An error (the store
// unreachable, the archive failing, ctx ending) ends the pass; what was
// deleted before it is in the report. The observer's Retired is told of
// every pass.
func (r *Retirer[S]) Retire(ctx context.Context) (RetireReport, error) {
	if r == nil || r.roles == nil {
		return RetireReport{}, errZeroRetirer
	}
	report, err := r.retire(ctx)
	if r.observer.Retired != nil {
		r.observer.Retired(report, err)
	}
	return report, err
}

func (r *Retirer[S]) retire(ctx context.Context) (RetireReport, error) {
	var report RetireReport
	var due []storage.Retired
	consider := func(recs []storage.Record) error {
		for _, rec := range recs {
			d, ok := r.due(rec, &report)
			if !ok {
				continue
			}
			due = append(due, d)
			if len(due) < r.batch {
				continue
			}
			if err := r.retireBatch(ctx, due, &report); err != nil {
				return err
			}
			due = due[:0]
			if err := r.sleep(ctx, r.pause); err != nil {
				return err
			}
		}
		return nil
	}
	if r.pages == nil {
		recs, bad, err := r.lister.List(ctx)
		if err != nil {
			return report, err
		}
		report.Unreadable = len(bad)
		if err := consider(recs); err != nil {
			return report, err
		}
	} else if statuses := r.retained(); len(statuses) > 0 {
		q := storage.Query{Statuses: statuses, Limit: max(r.batch, retirePage)}
		for {
			page, err := r.pages.ListPage(ctx, q)
			if err != nil {
				return report, err
			}
			report.Unreadable += len(page.Unreadable)
			if err := consider(page.Records); err != nil {
				return report, err
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
	}
	if len(due) > 0 {
		if err := r.retireBatch(ctx, due, &report); err != nil {
			return report, err
		}
	}
	return report, nil
}

// retirePage is how many records a pass asks the store for at a time,
// when its batches are smaller.
const retirePage = 500

// retained are the statuses the roles retire: the terminal ones with a
// retention.
func (r *Retirer[S]) retained() []string {
	var out []string
	for _, s := range r.roles.table.States() {
		if _, ok := r.roles.retain[s]; ok {
			name, _ := r.roles.table.Name(s)
			out = append(out, name)
		}
	}
	return out
}

// due says whether rec is due for retirement now, with the reason it
// is, counting in report what it keeps.
func (r *Retirer[S]) due(rec storage.Record, report *RetireReport) (storage.Retired, bool) {
	cur, err := r.roles.StateOf(rec)
	if err != nil {
		report.Unreadable++
		return storage.Retired{}, false
	}
	after, ok := r.roles.Retention(cur)
	if !ok {
		return storage.Retired{}, false // live, or kept for ever
	}
	ended := rec.Since
	if ended.IsZero() {
		ended = rec.UpdatedAt
	}
	now := r.clock.Now()
	at := ended.Add(after)
	if at.After(now) {
		report.Kept++
		if report.NextDue.IsZero() || at.Before(report.NextDue) {
			report.NextDue = at
		}
		return storage.Retired{}, false
	}
	if r.keep != nil && r.keep(rec) {
		report.Kept++
		return storage.Retired{}, false
	}
	return storage.Retired{Record: rec, Reason: fmt.Sprintf("%s, kept %v", rec.Status, after), At: now}, true
}

// retireBatch archives the batch, then deletes it record by record, each
// at the revision listed.
func (r *Retirer[S]) retireBatch(ctx context.Context, batch []storage.Retired, report *RetireReport) error {
	if r.archive != nil {
		if err := r.archive.Keep(ctx, batch); err != nil {
			return fmt.Errorf("recovery: Retirer: the archive did not keep %d records, so none was deleted: %w", len(batch), err)
		}
	}
	// The deletes of a batch go out together, a few at a time: a store
	// that commits writes in groups (bbolt's log, one flush for all) or
	// answers them in parallel (etcd, Kubernetes) takes them in one
	// round rather than one round each.
	errs := make([]error, len(batch))
	sem := make(chan struct{}, retireInFlight)
	var wg sync.WaitGroup
	for k, d := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[k] = r.deleter.Delete(ctx, d.Record.ID, d.Record.Revision)
		})
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		switch {
		case err == nil:
			report.Retired++
		case errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrHeld), errors.Is(err, storage.ErrNotFound):
			report.Skipped++
		default:
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// retireInFlight bounds the deletes a Retirer has in flight at once.
const retireInFlight = 16

// sleep waits d on the Retirer's clock, or until ctx ends.
func (r *Retirer[S]) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run makes a pass every interval, or sooner when a record kept falls
// due first, until ctx ends; then it returns nil. A pass that fails is
// told to the observer and tried again at the next; interval must be
// positive.
func (r *Retirer[S]) Run(ctx context.Context, interval time.Duration) error {
	if r == nil || r.roles == nil {
		return errZeroRetirer
	}
	if interval <= 0 {
		return fmt.Errorf("recovery: Retirer.Run: %w: interval %v, want a positive duration", ErrInvalidPolicy, interval)
	}
	for ctx.Err() == nil {
		report, _ := r.Retire(ctx)
		wait := interval
		if !report.NextDue.IsZero() {
			wait = max(min(wait, report.NextDue.Sub(r.clock.Now())), 0)
		}
		if r.sleep(ctx, wait) != nil {
			break
		}
	}
	return nil
}

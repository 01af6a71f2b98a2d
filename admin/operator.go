package admin

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Operator is what an operator does with the executions of one store:
// what the execfsm CLI does and what the [Handler] serves. A
// [StoreOperator] does it on a store in this process; a [Client] asks a
// controller's Handler to do it on the controller's store. Both return
// the same values and errors that match the same sentinels, so a tool
// written against Operator works both ways.
type Operator interface {
	// Table returns the table the store records (package schema); an
	// error matching schema.ErrNoTable when it records none.
	Table(ctx context.Context) (schema.Document, error)
	// Get returns one record; storage.ErrNotFound for an unknown id,
	// storage.ErrCorrupt for one that cannot be read.
	Get(ctx context.Context, id string) (storage.Record, error)
	// List returns one page of the records, in the store's order (see
	// [ListOptions]).
	List(ctx context.Context, opts ListOptions) (Page, error)
	// Stop asks the execution id to stop, as a cluster master does: it
	// writes the stopping status of the recorded table, through a move
	// that table allows, as an outside authority (never taking
	// ownership, so the owning controller is not fenced and shuts down
	// as asked). Without a recorded table it writes nothing and fails
	// with schema.ErrNoTable: a status the controllers' table lacks would
	// strand the record.
	Stop(ctx context.Context, req StopRequest) (Stopped, error)
	// Delete removes an execution's record for good, as an outside
	// authority: an ended one, or a live one when forced; never one a
	// controller holds. See [StoreOperator.Delete].
	Delete(ctx context.Context, req DeleteRequest) (Deleted, error)
	// Watch yields the records now (of ids, or all of them; an id that
	// is not there as EventGone), then every change as it lands, until
	// ctx is done or the watch fails; the failure is yielded last. Delivery is level-triggered: a record
	// written twice quickly may be seen once, as it is.
	Watch(ctx context.Context, ids ...string) iter.Seq2[Event, error]
}

// ListOptions choose a page of records.
type ListOptions struct {
	// Statuses, if any, keep the records in those statuses (records that
	// cannot be read are always listed: their status is not known).
	Statuses []string
	// IDContains, if set, keeps the records whose id contains it: what
	// an operator remembers of an id. The store is read a page of Limit
	// at a time until one holds a match, so such a page may hold up to
	// a store's page of matches more than Limit.
	IDContains string
	// Cursor starts the page where the one before ended (its
	// [Page].Next): the store's own cursor, passed back as it was given.
	Cursor string
	// Limit is the most entries (records and unreadable ones) a page
	// holds; 0 is every one for a StoreOperator and the handler's
	// largest page over HTTP.
	Limit int
}

// Page is one page of a listing. Each page is read afresh, in the
// store's order (ids in byte order on most stores): a walk through the
// pages sees every record that existed for the whole walk once, as it
// was when its page was read. A page of a few statuses reads those
// records only, through the store's status index
// (storage.PageLister).
type Page struct {
	// Items are the records in a status the recorded table (or an
	// earlier version of it) knows; every record when none is recorded.
	Items []storage.Record `json:"items"`
	// Foreign are the records in a status no version of the table
	// knows: written by another table, or by hand. Report them; never
	// write over them.
	Foreign []storage.Record `json:"foreign,omitempty"`
	// Unreadable are the records the store cannot read.
	Unreadable []Unreadable `json:"unreadable,omitempty"`
	// Next is the Cursor of the next page, empty on the last one.
	Next string `json:"next,omitempty"`
	// Counts are the number of records in each live status of the
	// recorded table (one its executions do not end in) in the whole
	// store, whatever the page's Statuses: what a dashboard shows. They
	// are counted from the store's status index without reading the
	// records (storage.Counter). Ended statuses are not counted: a store
	// keeps their records until they are retired, a million of them, and
	// counting them would cost more than the page. Empty when the store
	// records no table, or counts nothing (the Kubernetes store).
	Counts map[string]int `json:"counts,omitempty"`
}

// Unreadable is a stored record that cannot be read, with why.
type Unreadable struct {
	ID       string `json:"id"`
	Revision uint64 `json:"revision,omitempty"`
	// Err matches storage.ErrCorrupt.
	Err error `json:"-"`
}

// StopRequest asks one execution to stop.
type StopRequest struct {
	ID string
	// Reason is kept in the record's audit trail; it must not be blank.
	Reason string
	// Actor names who asks, in the audit trail. A [Handler] writes the
	// name its Authorizer returns, which may or may not be this one.
	Actor string
	// Force writes a stop a [Handler] would refuse because the
	// controller serving it would not act on it: the record is in a
	// status of a newer version of the table than the controller's
	// ([HandlerOptions].Serves). Stopped.Warning then says so.
	Force bool
}

// check refuses a request that cannot be written.
func (r StopRequest) check() error {
	if err := storage.ValidateID(r.ID); err != nil {
		return fmt.Errorf("admin: stop: %w", err)
	}
	switch {
	case strings.TrimSpace(r.Reason) == "":
		return fmt.Errorf("admin: stop %s: %w: a reason is needed: it is kept in the audit trail", r.ID, ErrInvalidRequest)
	case len(r.Reason) > storage.MaxReasonLen:
		return fmt.Errorf("admin: stop %s: %w: the reason is %d bytes, at most %d", r.ID, ErrInvalidRequest, len(r.Reason), storage.MaxReasonLen)
	case strings.TrimSpace(r.Actor) == "":
		return fmt.Errorf("admin: stop %s: %w: an actor is needed: it is kept in the audit trail", r.ID, ErrInvalidRequest)
	case len(r.Actor) > storage.MaxOwnerLen:
		return fmt.Errorf("admin: stop %s: %w: the actor is %d bytes, at most %d", r.ID, ErrInvalidRequest, len(r.Actor), storage.MaxOwnerLen)
	}
	return nil
}

// EventType says what a watch [Event] reports.
type EventType string

// The events of a watch.
const (
	// EventCurrent: a record as it was when the watch began.
	EventCurrent EventType = "current"
	// EventChanged: a record as it is after a write.
	EventChanged EventType = "changed"
	// EventGone: a record not there: one asked for by id that is not
	// there when the watch begins, or one deleted since. A record made
	// later under that id is an EventChanged.
	EventGone EventType = "gone"
	// EventUnreadable: a record that cannot be read, now or after a
	// write.
	EventUnreadable EventType = "unreadable"
)

// Event is one thing a watch reports.
type Event struct {
	Type EventType
	// ID is the record's id, for every type.
	ID string
	// Record is the record, for EventCurrent and EventChanged.
	Record storage.Record
	// Err, for EventUnreadable, says why; it matches storage.ErrCorrupt.
	Err error
}

// StoreOperator is an [Operator] on a store in this process: the CLI's
// when it opens a store itself, and the one a [Handler] serves.
type StoreOperator struct {
	store   storage.Store
	lister  storage.Lister     // nil if the store lists only in pages
	pages   storage.PageLister // nil if the store lists only whole
	counter storage.Counter    // nil if the store counts nothing
	watcher storage.Watcher    // nil if the store cannot watch
	serves  *serving           // the table of the controller serving a Handler, if it said
}

// serving is the table a controller decides with (HandlerOptions.Serves).
type serving struct {
	doc   schema.Document
	roles *recovery.Roles[string]
}

func newServing(d schema.Document) (*serving, error) {
	_, roles, err := d.Rebuild()
	if err != nil {
		return nil, err
	}
	return &serving{doc: d, roles: roles}, nil
}

// version is the version of the recorded table the controller serves,
// as "version N", or why none is known.
func (s *serving) version(recorded *schema.Document) string {
	if recorded == nil {
		return "a table the store does not record"
	}
	if v, ok := recorded.VersionOf(s.doc); ok {
		return fmt.Sprintf("version %d", v)
	}
	return "a version the store does not record"
}

// refuses says why the controller would not act on rec, if it would
// not: its table cannot decide on it (recovery.ErrForeignStatus).
func (s *serving) refuses(rec storage.Record, recorded *schema.Document) string {
	if _, err := s.roles.StateOf(rec); err == nil {
		return ""
	}
	status, what := rec.Status, "is in"
	if _, known := s.doc.Knows(rec.Status); known {
		status, what = rec.Previous, "returns to"
	}
	knownBy := ""
	if recorded != nil {
		if v, ok := recorded.Knows(status); ok {
			knownBy = fmt.Sprintf(" (version %d of the table knows it)", v)
		}
	}
	return fmt.Sprintf("%s %s %s, which this controller's table (%s %s) does not know%s: it would not act on a stop",
		rec.ID, what, status, s.doc.Name, s.version(recorded), knownBy)
}

// NewStoreOperator returns the operator of store, which must list its
// records: in pages (storage.PageLister, every store of this module),
// or whole (storage.Lister: each page then reads the whole store). Watch
// needs a storage.Watcher too, everything that reads the table a
// storage.TableKeeper, and the counts a storage.Counter.
func NewStoreOperator(store storage.Store) (*StoreOperator, error) {
	if store == nil {
		return nil, errors.New("admin: NewStoreOperator: nil store")
	}
	lister, canList := store.(storage.Lister)
	pages, canPage := store.(storage.PageLister)
	if !canList && !canPage {
		return nil, fmt.Errorf("admin: NewStoreOperator: %T does not list its records (storage.PageLister or storage.Lister)", store)
	}
	watcher, _ := store.(storage.Watcher)
	counter, _ := store.(storage.Counter)
	return &StoreOperator{store: store, lister: lister, pages: pages, counter: counter, watcher: watcher}, nil
}

var _ Operator = (*StoreOperator)(nil)

// Table implements [Operator]. A store that cannot keep a table records
// none: schema.ErrNoTable.
func (o *StoreOperator) Table(ctx context.Context) (schema.Document, error) {
	d, err := schema.Load(ctx, o.store)
	if errors.Is(err, schema.ErrNotKept) {
		return schema.Document{}, fmt.Errorf("%w (%w)", schema.ErrNoTable, err)
	}
	return d, err
}

// table is Table with no table an answer, not an error.
func (o *StoreOperator) table(ctx context.Context) (*schema.Document, error) {
	d, err := o.Table(ctx)
	switch {
	case errors.Is(err, schema.ErrNoTable):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("admin: the table the store records: %w", err)
	}
	return &d, nil
}

// Get implements [Operator].
func (o *StoreOperator) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := storage.ValidateID(id); err != nil {
		return storage.Record{}, fmt.Errorf("admin: get: %w", err)
	}
	return o.store.Get(ctx, id)
}

// List implements [Operator]. A store that lists in pages
// (storage.PageLister) is read a page at a time, of the statuses asked
// only; one that lists only whole is read whole for every page.
func (o *StoreOperator) List(ctx context.Context, opts ListOptions) (Page, error) {
	table, err := o.table(ctx)
	if err != nil {
		return Page{}, err
	}
	return o.listIn(ctx, table, opts)
}

// listIn is List on the table already read (nil for none): a page of the
// handler, which shows the table too, reads it once.
func (o *StoreOperator) listIn(ctx context.Context, table *schema.Document, opts ListOptions) (Page, error) {
	if opts.Limit < 0 {
		return Page{}, fmt.Errorf("admin: list: %w: limit %d", ErrInvalidRequest, opts.Limit)
	}
	if len(opts.Cursor) > storage.MaxCursorLen {
		return Page{}, fmt.Errorf("admin: list: %w: a cursor of %d bytes, no store gives one over %d", ErrInvalidRequest, len(opts.Cursor), storage.MaxCursorLen)
	}
	if opts.IDContains != "" {
		if err := storage.ValidateID(opts.IDContains); err != nil {
			return Page{}, fmt.Errorf("admin: list of ids containing: %w", err)
		}
	}
	wanted, err := statusSet(opts.Statuses, table)
	if err != nil {
		return Page{}, err
	}
	live, err := liveStatuses(table)
	if err != nil {
		return Page{}, err
	}
	if o.pages == nil {
		recs, bad, err := o.lister.List(ctx)
		if err != nil {
			return Page{}, err
		}
		return page(recs, bad, table, wanted, live, opts), nil
	}
	p, err := o.pagedList(ctx, table, opts)
	if err != nil {
		return Page{}, err
	}
	if o.counter != nil && len(live) > 0 {
		if p.Counts, err = o.counter.CountStatuses(ctx, live...); err != nil {
			return Page{}, err
		}
	}
	return p, nil
}

// listAll lists every record, whole or page by page.
func (o *StoreOperator) listAll(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	if o.lister != nil {
		return o.lister.List(ctx)
	}
	return storage.ListAll(ctx, o.pages, storage.MaxPageLimit)
}

// liveStatuses are the statuses of the recorded table's latest version
// that are not terminal: those Counts counts (none without a table).
func liveStatuses(table *schema.Document) ([]string, error) {
	if table == nil {
		return nil, nil
	}
	t, _, err := table.Rebuild()
	if err != nil {
		return nil, fmt.Errorf("admin: the table the store records: %w", err)
	}
	return t.LiveStatuses(), nil
}

// pagedList is List on a store that lists in pages.
func (o *StoreOperator) pagedList(ctx context.Context, table *schema.Document, opts ListOptions) (Page, error) {
	q := storage.Query{Statuses: opts.Statuses, Cursor: opts.Cursor, Limit: opts.Limit}
	if opts.Limit == 0 {
		q.Limit = storage.MaxPageLimit
	}
	p := Page{Items: []storage.Record{}}
	entries := 0
	for {
		got, err := o.pages.ListPage(ctx, q)
		if errors.Is(err, storage.ErrInvalidQuery) {
			return Page{}, fmt.Errorf("admin: list: %w: %w", ErrInvalidRequest, err)
		}
		if err != nil {
			return Page{}, err
		}
		for _, rec := range got.Records {
			switch {
			case !strings.Contains(rec.ID, opts.IDContains):
				continue
			case table != nil && !knows(table, rec.Status):
				p.Foreign = append(p.Foreign, rec)
			default:
				p.Items = append(p.Items, rec)
			}
			entries++
		}
		for _, u := range got.Unreadable {
			if strings.Contains(u.ID, opts.IDContains) {
				p.Unreadable = append(p.Unreadable, Unreadable{ID: u.ID, Revision: u.Revision, Err: u.Err})
				entries++
			}
		}
		if got.Next == "" {
			return p, nil
		}
		q.Cursor = got.Next
		if opts.Limit > 0 && (opts.IDContains == "" || entries > 0) {
			p.Next = got.Next
			return p, nil
		}
	}
}

// statusSet checks the statuses a listing asks for against the table:
// asking for a status no version of it has is a mistake (a typo), told
// at once rather than answered with nothing.
func statusSet(statuses []string, table *schema.Document) (map[string]bool, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	wanted := make(map[string]bool, len(statuses))
	for _, s := range statuses {
		switch {
		case s == "" || len(s) > storage.MaxStatusLen:
			return nil, fmt.Errorf("admin: list: %w: %q is no status", ErrInvalidRequest, s)
		case table != nil:
			if _, known := table.Knows(s); !known {
				return nil, fmt.Errorf("admin: list: %w: %q is not a status of table %s (version %d): %s",
					ErrInvalidRequest, s, table.Name, table.Version, strings.Join(table.Table.States, ", "))
			}
		}
		wanted[s] = true
	}
	return wanted, nil
}

// page cuts one page out of a whole listing (records and unreadable ones
// each in id order, as storage.Lister returns them); the cursor is the
// last id of the page before.
func page(recs []storage.Record, bad []storage.Unreadable, table *schema.Document, wanted map[string]bool, live []string, opts ListOptions) Page {
	var p Page
	if len(live) > 0 {
		p.Counts = make(map[string]int, len(live))
		for _, s := range live {
			p.Counts[s] = 0
		}
		for _, r := range recs {
			if _, counted := p.Counts[r.Status]; counted {
				p.Counts[r.Status]++
			}
		}
	}
	type entry struct {
		id  string
		rec *storage.Record
		bad *storage.Unreadable
	}
	var entries []entry
	for i := range recs {
		if (wanted == nil || wanted[recs[i].Status]) && recs[i].ID > opts.Cursor && strings.Contains(recs[i].ID, opts.IDContains) {
			entries = append(entries, entry{id: recs[i].ID, rec: &recs[i]})
		}
	}
	for i := range bad {
		if bad[i].ID > opts.Cursor && strings.Contains(bad[i].ID, opts.IDContains) {
			entries = append(entries, entry{id: bad[i].ID, bad: &bad[i]})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.id, b.id) })
	if opts.Limit > 0 && len(entries) > opts.Limit {
		entries = entries[:opts.Limit]
		p.Next = entries[len(entries)-1].id
	}
	p.Items = []storage.Record{}
	for _, e := range entries {
		switch {
		case e.bad != nil:
			p.Unreadable = append(p.Unreadable, Unreadable{ID: e.id, Revision: e.bad.Revision, Err: e.bad.Err})
		case table != nil && !knows(table, e.rec.Status):
			p.Foreign = append(p.Foreign, *e.rec)
		default:
			p.Items = append(p.Items, *e.rec)
		}
	}
	return p
}

func knows(table *schema.Document, status string) bool {
	_, ok := table.Knows(status)
	return ok
}

// Stop implements [Operator].
func (o *StoreOperator) Stop(ctx context.Context, req StopRequest) (Stopped, error) {
	if err := req.check(); err != nil {
		return Stopped{}, err
	}
	d, table, roles, err := o.recordedTable(ctx, "stop", req.ID, "which status stops an execution")
	if err != nil {
		return Stopped{}, err
	}
	stopping, _, ok := roles.Stopping()
	if !ok {
		return Stopped{}, fmt.Errorf("admin: stop %s: %w: table %s (version %d) has no stopping status: its executions are not stopped by request", req.ID, ErrNoStop, d.Name, d.Version)
	}
	exec, err := transition.NewPersisted(table, o.store, req.ID, transition.PersistedOptions{Actor: req.Actor})
	if err != nil {
		return Stopped{}, fmt.Errorf("admin: stop %s: %w", req.ID, err)
	}
	var warnings []string
	var owner storage.Claim
	c, _, err := exec.Apply(ctx, func(_ string, rec storage.Record) (transition.Update[string], error) {
		warnings, owner = nil, rec.Claim()
		if o.serves == nil {
			return transition.To(stopping).Because(req.Reason), nil
		}
		if why := o.serves.refuses(rec, &d); why != "" {
			if !req.Force {
				return transition.Update[string]{}, fmt.Errorf("%w: %s; stop it through a controller whose table knows its status, or force the stop", recovery.ErrForeignStatus, why)
			}
			warnings = append(warnings, "forced: "+why)
		}
		return transition.To(stopping).Because(req.Reason), nil
	})
	switch {
	case errors.Is(err, recovery.ErrForeignStatus):
		return Stopped{}, fmt.Errorf("admin: stop %s: %w", req.ID, err)
	case errors.Is(err, transition.ErrUnknownState):
		return Stopped{}, fmt.Errorf("%w: it is not a status of table %s (version %d), so it is left alone", err, d.Name, d.Version)
	case err != nil:
		return Stopped{}, err
	}
	stopped := stoppedOf(c)
	if c.Changed() {
		if w := o.unheld(ctx, req.ID, owner, roles, stopping); w != "" {
			warnings = append(warnings, w)
		}
	}
	stopped.Warnings = warnings
	return stopped, nil
}

// unheld says, when no controller holds id, who will carry its stop out:
// nobody until a controller takes it over or the Reaper ends it.
func (o *StoreOperator) unheld(ctx context.Context, id string, claim storage.Claim, roles *recovery.Roles[string], stopping string) string {
	_, held, err := o.store.Held(ctx, id)
	switch {
	case err != nil:
		return fmt.Sprintf("whether a controller holds %s could not be read (%v): if none does, nobody acts on the stop until one takes it over", id, err)
	case held:
		return ""
	}
	who := "it has no owner"
	if claim.Owner != "" {
		who = fmt.Sprintf("its owner %s@%d holds it no more", claim.Owner, claim.Epoch)
	}
	then := "nothing ends it before then"
	for _, t := range roles.TimersOf(stopping) {
		if t.After > 0 && t.Since == "" {
			then = fmt.Sprintf("or a Reaper ends it once it has been %s for %v (the table's deadline)", stopping, t.After)
			break
		}
	}
	return fmt.Sprintf("no controller holds %s now (%s): the stop is carried out by the controller that takes it over, %s", id, who, then)
}

// Watch implements [Operator]. The store must be a storage.Watcher; a
// watch of one that is not fails with ErrCannotWatch. The watch reads
// the store's log as fast as it is consumed: a consumer that does not
// read holds no memory, it falls behind.
func (o *StoreOperator) Watch(ctx context.Context, ids ...string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if o.watcher == nil {
			yield(Event{}, fmt.Errorf("admin: watch: %w: %T", ErrCannotWatch, o.store))
			return
		}
		for _, id := range ids {
			if err := storage.ValidateID(id); err != nil {
				yield(Event{}, fmt.Errorf("admin: watch: %w", err))
				return
			}
		}
		if err := o.watch(ctx, ids, yield); err != nil && ctx.Err() == nil {
			yield(Event{}, err)
		}
	}
}

// watch yields the records now, then each change; it returns nil when
// the consumer stops or ctx ends.
func (o *StoreOperator) watch(ctx context.Context, ids []string, yield func(Event, error) bool) error {
	only := make(map[string]bool, len(ids))
	for _, id := range ids {
		only[id] = true
	}
	wanted := func(id string) bool { return len(only) == 0 || only[id] }
	recs, bad, err := o.listAll(ctx)
	if err != nil {
		return fmt.Errorf("admin: watch: %w", err)
	}
	var from uint64
	var now []Event
	found := make(map[string]bool, len(ids))
	for _, r := range recs {
		from = max(from, r.Revision)
		if wanted(r.ID) {
			now = append(now, Event{Type: EventCurrent, ID: r.ID, Record: r})
			found[r.ID] = true
		}
	}
	for _, u := range bad {
		from = max(from, u.Revision)
		if wanted(u.ID) {
			now = append(now, Event{Type: EventUnreadable, ID: u.ID, Err: u.Err})
			found[u.ID] = true
		}
	}
	// An id asked for that is not there is told at once, as it is now:
	// a watch that said nothing would be a typo waited on for ever.
	for _, id := range ids {
		if !found[id] {
			now = append(now, Event{Type: EventGone, ID: id})
			found[id] = true
		}
	}
	// Start watching before yielding the records, so that the watch
	// begins at the listing's revision whatever the consumer's pace.
	// StoreEvents watches again after a broken connection, from the last
	// revision it delivered.
	ctx, cancel := context.WithCancel(ctx)
	events, err := reconcile.StoreEvents(ctx, o.watcher, reconcile.StoreEventsOptions{From: from})
	if err != nil {
		cancel()
		return fmt.Errorf("admin: watch: %w", err)
	}
	defer func() {
		cancel()
		for range events { // StoreEvents ends with ctx: nothing outlives the watch
		}
	}()
	for _, ev := range now {
		if !yield(ev, nil) {
			return nil
		}
	}
	for id := range events {
		if !wanted(id) {
			continue
		}
		rec, err := o.store.Get(ctx, id)
		var ev Event
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			ev = Event{Type: EventChanged, ID: id, Record: rec}
		case errors.Is(err, storage.ErrNotFound):
			ev = Event{Type: EventGone, ID: id}
		case errors.Is(err, storage.ErrCorrupt):
			ev = Event{Type: EventUnreadable, ID: id, Err: err}
		default:
			return fmt.Errorf("admin: watch: %w", err)
		}
		if !yield(ev, nil) {
			return nil
		}
	}
	return nil
}

// DeleteRequest asks to remove one execution's record for good.
type DeleteRequest struct {
	ID string
	// Reason says why; it must not be blank. The archive keeps it.
	Reason string
	// Actor names who asks, as in StopRequest.
	Actor string
	// Force deletes an execution that has not ended (a duplicate
	// submission, a record written by mistake); a controller that holds
	// it is never overruled (storage.ErrHeld) either way.
	Force bool
	// Archive, if set, keeps the record with its trail before it goes;
	// a failing archive stops the delete. Through a [Handler] it is the
	// handler's (HandlerOptions.Archive), whatever the client gives.
	Archive storage.Archive `json:"-"`
}

// check refuses a request that cannot be made.
func (r DeleteRequest) check() error {
	if err := storage.ValidateID(r.ID); err != nil {
		return fmt.Errorf("admin: delete: %w", err)
	}
	switch {
	case strings.TrimSpace(r.Reason) == "":
		return fmt.Errorf("admin: delete %s: %w: a reason is needed: the archive keeps it", r.ID, ErrInvalidRequest)
	case len(r.Reason) > storage.MaxReasonLen:
		return fmt.Errorf("admin: delete %s: %w: the reason is %d bytes, at most %d", r.ID, ErrInvalidRequest, len(r.Reason), storage.MaxReasonLen)
	}
	return nil
}

// Deleted is what a delete removed.
type Deleted struct {
	ID string `json:"id"`
	// Status is the status the execution was in.
	Status string `json:"status"`
	// Revision is the revision the record was deleted at.
	Revision uint64 `json:"revision"`
	Actor    string `json:"actor"`
	Reason   string `json:"reason"`
}

// Delete removes an execution's record for good, as an outside
// authority (transition.Persisted.Delete): an ended one (a terminal
// status of the recorded table), or a live one when forced; never one a
// controller holds (storage.ErrHeld). Without a recorded table it
// deletes nothing (schema.ErrNoTable): which statuses have ended is the
// table's to say. A store that cannot delete is errors.ErrUnsupported.
func (o *StoreOperator) Delete(ctx context.Context, req DeleteRequest) (Deleted, error) {
	if err := req.check(); err != nil {
		return Deleted{}, err
	}
	_, table, _, err := o.recordedTable(ctx, "delete", req.ID, "which statuses have ended")
	if err != nil {
		return Deleted{}, err
	}
	exec, err := transition.NewPersisted(table, o.store, req.ID, transition.PersistedOptions{Actor: req.Actor})
	if err != nil {
		return Deleted{}, fmt.Errorf("admin: delete %s: %w", req.ID, err)
	}
	rec, err := exec.Delete(ctx, transition.Deletion{Reason: req.Reason, Force: req.Force, Archive: req.Archive})
	if err != nil {
		return Deleted{}, err
	}
	return Deleted{ID: rec.ID, Status: rec.Status, Revision: rec.Revision, Actor: req.Actor, Reason: req.Reason}, nil
}

// recordedTable is the table the store records, rebuilt, for a write
// (what) of execution id: without one nothing is written, since the
// table is the controllers' to say (why: what it decides).
func (o *StoreOperator) recordedTable(ctx context.Context, what, id, why string) (schema.Document, *transition.Table[string], *recovery.Roles[string], error) {
	d, err := o.Table(ctx)
	if errors.Is(err, schema.ErrNoTable) {
		return schema.Document{}, nil, nil, fmt.Errorf("admin: %s %s: %w: %s is the controllers' table's to say, and they record it when they start (schema.Save)", what, id, err, why)
	}
	if err != nil {
		return schema.Document{}, nil, nil, fmt.Errorf("admin: %s %s: the table the store records: %w", what, id, err)
	}
	table, roles, err := d.Rebuild()
	if err != nil {
		return schema.Document{}, nil, nil, fmt.Errorf("admin: %s %s: %w", what, id, err)
	}
	return d, table, roles, nil
}

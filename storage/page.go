package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// MaxPageLimit bounds [Query].Limit: a page is one request to the
// store, and its records are held in memory at once.
const MaxPageLimit = 10_000

// MaxCursorLen bounds [Query].Cursor: longer than any cursor a store
// gives (an id, a Kubernetes continue token).
const MaxCursorLen = 8 << 10

// Query selects one page of records for a [PageLister].
type Query struct {
	// Statuses, if any, selects the records in one of these statuses
	// (a controller's live ones, the Retirer's ended ones); none selects
	// every record. A store keeps an index of its records by status,
	// written with each record, so that a page of a few statuses costs
	// what those records cost, not what the store holds.
	Statuses []string
	// Cursor is where the page starts: the Next of the page before, or
	// "" for the first page. It is the store's own; pass it back as it
	// was given.
	Cursor string
	// Limit is the most records the page holds: 1 to MaxPageLimit.
	Limit int
}

// Validate refuses a query no store answers: a Limit out of range, a
// status no record can have.
func (q Query) Validate() error {
	if q.Limit < 1 || q.Limit > MaxPageLimit {
		return fmt.Errorf("storage: %w: Limit %d, want 1 to %d", ErrInvalidQuery, q.Limit, MaxPageLimit)
	}
	if len(q.Cursor) > MaxCursorLen {
		return fmt.Errorf("storage: %w: a cursor of %d bytes, no store gives one over %d", ErrInvalidQuery, len(q.Cursor), MaxCursorLen)
	}
	return CheckStatuses(q.Statuses)
}

// ErrInvalidQuery is matched by the error of a [Query] no store
// answers, and of a Cursor a store did not give (or gave so long ago
// that it no longer holds: the Kubernetes store's continue tokens
// expire); nothing was read.
var ErrInvalidQuery = errors.New("invalid query")

// Page is one page of records, with, apart, those the store could not
// read. Pages are in an order of the store's own, the same for every
// page: ids in byte order on Memory and bbolt, their escaped keys on
// etcd, their ConfigMaps' names on Kubernetes. A page before the last
// holds Limit records (the Kubernetes store's may hold fewer when it
// filters a status no label can hold).
type Page struct {
	Records    []Record
	Unreadable []Unreadable
	// Next is the Cursor of the page after this one; "" when this is the
	// last.
	Next string
}

// PageLister is implemented by stores that list their records in pages,
// filtered by status: what a controller that restarts over a store of a
// million ended executions and ten thousand live ones needs, to read
// only the live ones. Every store of this module implements it.
//
// Each page is read at one revision of the store; pages are not read at
// the same one: a record written between two pages is on the page its
// id falls in, as it was when that page was read, and a record created
// or deleted meanwhile may be missed. A reader that must see every
// change lists, then watches from the revision it started at.
type PageLister interface {
	ListPage(ctx context.Context, q Query) (Page, error)
}

// ListAll lists every record of the statuses given (every record with
// none), page after page of limit records: what a caller that needs them
// all at once, but not the others, uses.
func ListAll(ctx context.Context, l PageLister, limit int, statuses ...string) ([]Record, []Unreadable, error) {
	var recs []Record
	var bad []Unreadable
	q := Query{Statuses: statuses, Limit: limit}
	for {
		page, err := l.ListPage(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, page.Records...)
		bad = append(bad, page.Unreadable...)
		if page.Next == "" {
			return recs, bad, nil
		}
		q.Cursor = page.Next
	}
}

// statusIndex is Memory's index of its records' ids by status.
type statusIndex map[string]map[string]struct{}

func (x statusIndex) add(status, id string) {
	ids := x[status]
	if ids == nil {
		ids = map[string]struct{}{}
		x[status] = ids
	}
	ids[id] = struct{}{}
}

// remove takes id out of status's set, which stays, empty or not: a
// table has a few statuses, and a record moving back and forth between
// two would otherwise make a set anew at every move.
func (x statusIndex) remove(status, id string) {
	delete(x[status], id)
}

// ListPage implements [PageLister]. The Cursor is the last id of the
// page before.
func (s *Memory) ListPage(ctx context.Context, q Query) (Page, error) {
	if err := CheckContext(ctx, "storage", "ListPage"); err != nil {
		return Page{}, err
	}
	if err := q.Validate(); err != nil {
		return Page{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	if len(q.Statuses) == 0 {
		for id := range s.records {
			if id > q.Cursor {
				ids = append(ids, id)
			}
		}
	} else {
		for _, status := range dedupe(q.Statuses) {
			for id := range s.byStatus[status] {
				if id > q.Cursor {
					ids = append(ids, id)
				}
			}
		}
	}
	slices.Sort(ids)
	var page Page
	if len(ids) > q.Limit {
		ids = ids[:q.Limit]
		page.Next = ids[len(ids)-1]
	}
	page.Records = make([]Record, len(ids))
	for k, id := range ids {
		page.Records[k] = s.records[id].Clone()
	}
	return page, nil
}

// dedupe returns statuses without repeats, in order.
func dedupe(statuses []string) []string {
	out := make([]string, 0, len(statuses))
	for _, s := range statuses {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

var _ PageLister = (*Memory)(nil)

// Counter is implemented by stores that count their records by status
// from their status index, without reading the records: what a
// dashboard shows beside a page. Every store of this module but the
// Kubernetes one (whose API server counts nothing it does not send)
// implements it.
type Counter interface {
	// CountStatuses returns how many records are in each status given
	// (zero included), at one revision. Counting a status costs what
	// its index range costs: count the live statuses, not the ended
	// ones a store holds a million of.
	CountStatuses(ctx context.Context, statuses ...string) (map[string]int, error)
}

var _ Counter = (*Memory)(nil)

// CheckStatuses refuses a status no record can have: what a Counter
// checks before counting.
func CheckStatuses(statuses []string) error {
	for _, s := range statuses {
		if s == "" || len(s) > MaxStatusLen {
			return fmt.Errorf("storage: %w: status %s, want 1 to %d bytes", ErrInvalidQuery, quote.Limited(s), MaxStatusLen)
		}
	}
	return nil
}

// CountStatuses implements [Counter].
func (s *Memory) CountStatuses(ctx context.Context, statuses ...string) (map[string]int, error) {
	if err := CheckContext(ctx, "storage", "CountStatuses"); err != nil {
		return nil, err
	}
	if err := CheckStatuses(statuses); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(statuses))
	for _, status := range statuses {
		out[status] = len(s.byStatus[status])
	}
	return out, nil
}

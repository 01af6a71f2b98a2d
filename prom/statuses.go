package prom

import (
	"context"
	"errors"
	"sync"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/backoff"
	"github.com/execfsm/execfsm/transition"
)

// Source is a store [Statuses] can follow: it lists the records once,
// then reads each one its watch says was written.
type Source interface {
	Get(ctx context.Context, id string) (storage.Record, error)
	storage.Lister
	storage.Watcher
}

// Statuses keeps execfsm_executions{status}, the executions by status
// (every status of the table, relocating included, zero or not), and
// execfsm_unreadable_records, from a store: a List, then the store's
// Watch, reading each record written. It is the gauge Teraslice keeps
// per status, but from the store, so it counts every controller's
// executions, not only one process's. Until its first List succeeds it
// reports nothing rather than zeros. A record deleted while the watch
// was broken stays counted until Run starts again: a resumed watch
// replays the records the store holds, not the ones it dropped.
type Statuses[S comparable] struct {
	table  *transition.Table[S]
	source Source
	onErr  func(error)

	mu         sync.Mutex
	listed     bool
	byID       map[string]string // status of every readable record
	unreadable map[string]bool
}

// NewStatuses returns the gauge for the records of source under table
// and adds it to m; call Run to keep it. onError, if not nil, hears of
// every failed List, Get or Watch (each is retried); it runs on Run's
// goroutine.
func NewStatuses[S comparable](m *Metrics, table *transition.Table[S], source Source, onError func(error)) (*Statuses[S], error) {
	if m == nil || table == nil || source == nil {
		return nil, errors.New("prom: NewStatuses: nil Metrics, table or source")
	}
	s := &Statuses[S]{table: table, source: source, onErr: onError, byID: map[string]string{}, unreadable: map[string]bool{}}
	m.mu.Lock()
	m.statuses = append(m.statuses, s)
	m.mu.Unlock()
	return s, nil
}

// Run lists the records, then follows the store's watch until ctx is
// done, when it returns ctx's error. A failed List is retried (100 ms
// doubling to 5 s); a broken watch is watched again from the last
// revision seen (reconcile.StoreEvents), so the gauge outlives a store
// outage.
func (s *Statuses[S]) Run(ctx context.Context) error {
	from, err := s.list(ctx)
	if err != nil {
		return err
	}
	events, err := reconcile.StoreEvents(ctx, s.source, reconcile.StoreEventsOptions{From: from, OnError: s.report})
	if err != nil {
		return err
	}
	for id := range events {
		s.refresh(ctx, id)
	}
	return ctx.Err()
}

// list fills the gauge from one List, retrying until one succeeds or ctx
// ends, and returns the highest revision it saw.
func (s *Statuses[S]) list(ctx context.Context) (uint64, error) {
	for failures := 0; ; failures++ {
		recs, bad, err := s.source.List(ctx)
		if err == nil {
			var from uint64
			s.mu.Lock()
			clear(s.byID)
			clear(s.unreadable)
			for _, r := range recs {
				s.byID[r.ID] = r.Status
				from = max(from, r.Revision)
			}
			for _, u := range bad {
				s.unreadable[u.ID] = true
				from = max(from, u.Revision)
			}
			s.listed = true
			s.mu.Unlock()
			return from, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		s.report(err)
		if !backoff.Rewatch.Sleep(ctx, failures) {
			return 0, ctx.Err()
		}
	}
}

// refresh reads one record the watch says was written and files it.
func (s *Statuses[S]) refresh(ctx context.Context, id string) {
	rec, err := s.source.Get(ctx, id)
	s.mu.Lock()
	switch {
	case err == nil:
		s.byID[id] = rec.Status
		delete(s.unreadable, id)
	case errors.Is(err, storage.ErrNotFound):
		delete(s.byID, id)
		delete(s.unreadable, id)
		err = nil
	case errors.Is(err, storage.ErrCorrupt):
		delete(s.byID, id)
		s.unreadable[id] = true
		err = nil
	}
	s.mu.Unlock()
	// Otherwise the store is failing: what was known stays; the watch,
	// or the re-list that follows a broken one, brings the record back.
	if err != nil && ctx.Err() == nil {
		s.report(err)
	}
}

func (s *Statuses[S]) report(err error) {
	if s.onErr != nil {
		s.onErr(err)
	}
}

// snapshot counts the records by status: every state of the table, and
// those in a status the table does not know (another table's, a newer
// version's) under "unknown", which keeps the label's values bounded by
// the table.
func (s *Statuses[S]) snapshot() (map[string]int, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.listed {
		return nil, 0, false
	}
	counts := make(map[string]int, s.table.Len())
	for _, st := range s.table.States() {
		if name, ok := s.table.Name(st); ok {
			counts[name] = 0
		}
	}
	for _, status := range s.byID {
		if _, known := counts[status]; !known {
			status = "unknown"
		}
		counts[status]++
	}
	return counts, len(s.unreadable), true
}

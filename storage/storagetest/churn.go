package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// Written is one write Churn made and the store acknowledged: the
// record written, or (Gone) its delete, at its revision.
type Written struct {
	Revision uint64
	Record   storage.Record
	Gone     bool
}

// Churn writes record id once, as the k-th write of its only writer:
// created (as Sample, running) when it is not there, moved between
// running and paused, deleted every seventh time. It returns what the
// store acknowledged. The store must implement storage.Deleter and
// storage.Watcher (a delete's revision is read from the watch: the id's
// first event after the record deleted). What a backup taken under load
// is compared with: a test keeps every Written and asks AsOf for the
// store at the backup's revision.
func Churn(ctx context.Context, s storage.Store, id string, k int) (Written, error) {
	rec, err := s.Get(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		fresh := Sample(id)
		created, err := s.Create(ctx, fresh)
		return Written{Revision: created.Revision, Record: created}, err
	}
	if err != nil {
		return Written{}, err
	}
	if k%7 == 6 {
		return deleteWatched(ctx, s, rec)
	}
	next := rec
	next.Status = map[string]string{"running": "paused", "paused": "running"}[rec.Status]
	next.Reason = fmt.Sprintf("write %d", k)
	out, err := s.CompareAndSwap(ctx, id, rec.Revision, next)
	return Written{Revision: out.Revision, Record: out}, err
}

// deleteWatched deletes rec and returns the delete with its revision.
func deleteWatched(ctx context.Context, s storage.Store, rec storage.Record) (Written, error) {
	d, ok := s.(storage.Deleter)
	w, watches := s.(storage.Watcher)
	if !ok || !watches {
		return Written{}, fmt.Errorf("storagetest: Churn: %T must implement storage.Deleter and storage.Watcher", s)
	}
	if err := d.Delete(ctx, rec.ID, rec.Revision); err != nil {
		return Written{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	events, err := w.Watch(ctx, rec.Revision)
	if err != nil {
		return Written{}, err
	}
	for ev := range events {
		if ev.ID == rec.ID {
			return Written{Revision: ev.Revision, Gone: true}, nil
		}
	}
	return Written{}, fmt.Errorf("storagetest: Churn: no event of the delete of %s within 10s", rec.ID)
}

// AsOf returns the records history says the store held at revision: for
// each id, its last write at or before it, unless that was a delete.
func AsOf(history map[string][]Written, revision uint64) map[string]storage.Record {
	out := map[string]storage.Record{}
	for id, ws := range history {
		var last *Written
		for i := range ws {
			if ws[i].Revision <= revision && (last == nil || ws[i].Revision > last.Revision) {
				last = &ws[i]
			}
		}
		if last != nil && !last.Gone {
			out[id] = last.Record
		}
	}
	return out
}

// Load is writers churning a store's records (Churn), each its own ids,
// until stopped, keeping every write the store acknowledged: the load a
// backup is taken under, and what the backup is then compared with.
type Load struct {
	mu      sync.Mutex
	history map[string][]Written
	stop    context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
}

// StartLoad starts writers writers on s, each churning ids records of
// its own ("ex-W-N").
func StartLoad(s storage.Store, writers, ids int) *Load {
	ctx, stop := context.WithCancel(context.Background())
	l := &Load{history: map[string][]Written{}, stop: stop, errs: make(chan error, writers)}
	for w := range writers {
		l.wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				id := fmt.Sprintf("ex-%d-%d", w, k%ids)
				written, err := Churn(context.Background(), s, id, k)
				if err != nil {
					l.errs <- err
					return
				}
				l.mu.Lock()
				l.history[id] = append(l.history[id], written)
				l.mu.Unlock()
			}
		})
	}
	return l
}

// Stop stops the writers, waits for them, fails t if one of them failed,
// and returns every acknowledged write by id.
func (l *Load) Stop(t testing.TB) map[string][]Written {
	t.Helper()
	l.stop()
	l.wg.Wait()
	close(l.errs)
	for err := range l.errs {
		if err != nil {
			t.Fatalf("storagetest: a writer of the load: %v", err)
		}
	}
	return l.history
}

// Encoded is rec as a store writes it (Record.MarshalBinary): two
// records that encode alike are the same record, revision, trail and
// all. It fails t on a record that does not encode.
func Encoded(t testing.TB, rec storage.Record) string {
	t.Helper()
	data, err := rec.MarshalBinary()
	if err != nil {
		t.Fatalf("storagetest: record %q does not encode: %v", rec.ID, err)
	}
	return string(data)
}

package boltstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/boltstore/internal/wal"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"
	"github.com/execfsm/execfsm/storage/storekit/locallease"
	"github.com/execfsm/execfsm/storage/storekit/quote"
	"github.com/execfsm/execfsm/storage/storekit/watchlog"
	bolt "go.etcd.io/bbolt"
)

// Store returns the store of namespace, creating its bucket if needed.
// Namespaces keep unrelated lifecycles (executions, simulators) apart in
// one file; a namespace is 1 to 128 bytes of UTF-8.
func (db *DB) Store(namespace string) (*Store, error) {
	if db.bolt == nil {
		return nil, errZeroDB
	}
	if err := wal.CheckNamespace(namespace); err != nil {
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, fmt.Errorf("boltstore: %w", ErrClosed)
	}
	if s, ok := db.stores[namespace]; ok {
		return s, nil
	}
	name := []byte("ns/" + namespace)
	var err error
	if db.readOnly {
		err = db.view("Store", func(tx *bolt.Tx) error {
			ns := tx.Bucket(name)
			if ns == nil || ns.Bucket(recordsKey) == nil || ns.Bucket(logKey) == nil {
				return fmt.Errorf("%w: the file holds no such namespace (a read-only database cannot create it)", storage.ErrNotFound)
			}
			return nil
		})
	} else if err = db.view("Store", func(tx *bolt.Tx) error {
		if ns := tx.Bucket(name); ns == nil || ns.Bucket(recordsKey) == nil || ns.Bucket(logKey) == nil ||
			ns.Bucket(statusOfKey) == nil || ns.Bucket(byStatusKey) == nil {
			return errMissingNamespace
		}
		return nil
	}); errors.Is(err, errMissingNamespace) {
		// Written only when something is missing: a file verified in the
		// background takes no write before its walk has passed.
		err = db.update("Store", func(tx *bolt.Tx) error {
			ns, records, _, err := createNamespace(tx, name)
			if err == nil {
				_, err = openIndex(ns, records)
			}
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: namespace %q: %w", namespace, err)
	}
	s := &Store{db: db, namespace: namespace, bucket: name}
	db.stores[namespace] = s
	return s, nil
}

// errMissingNamespace says a namespace's buckets are to be made.
var errMissingNamespace = errors.New("namespace missing")

// Store is one namespace of a [DB]. It implements [storage.Store],
// [storage.Lister], [storage.PageLister], [storage.Watcher] and
// [storage.Deleter], and is safe for concurrent use.
type Store struct {
	db        *DB
	namespace string
	bucket    []byte
	hub       watchlog.Hub
	owners    locallease.Table
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.Lister     = (*Store)(nil)
	_ storage.PageLister = (*Store)(nil)
	_ storage.Watcher    = (*Store)(nil)
)

func (s *Store) check(ctx context.Context, op string) error {
	if s == nil {
		return fmt.Errorf("boltstore: %s: %w", op, errNilStore)
	}
	if s.db == nil {
		return fmt.Errorf("boltstore: %s: %w", op, errZeroStore)
	}
	if err := storage.CheckContext(ctx, "boltstore", op); err != nil {
		return err
	}
	s.db.mu.Lock()
	closed := s.db.closed
	s.db.mu.Unlock()
	if closed {
		return fmt.Errorf("boltstore: %s: %w", op, ErrClosed)
	}
	return nil
}

// createNamespace returns the buckets of the namespace bucket name,
// creating those missing.
func createNamespace(tx *bolt.Tx, name []byte) (ns, records, log *bolt.Bucket, err error) {
	if ns, err = tx.CreateBucketIfNotExists(name); err != nil {
		return nil, nil, nil, err
	}
	if records, err = ns.CreateBucketIfNotExists(recordsKey); err != nil {
		return nil, nil, nil, err
	}
	if log, err = ns.CreateBucketIfNotExists(logKey); err != nil {
		return nil, nil, nil, err
	}
	return ns, records, log, nil
}

func (s *Store) buckets(tx *bolt.Tx) (ns, records, log *bolt.Bucket) {
	ns = tx.Bucket(s.bucket)
	return ns, ns.Bucket(recordsKey), ns.Bucket(logKey)
}

// decode reads the record stored under id.
func (s *Store) decode(id string, data []byte) (storage.Record, error) {
	return decodeRecord(s.namespace, id, data)
}

// decodeRecord is Store.decode for an id as a string or as bbolt's key
// (which becomes a string only in an error).
func decodeRecord[ID string | []byte](namespace string, id ID, data []byte) (storage.Record, error) {
	var rec storage.Record
	if err := rec.UnmarshalBinary(data); err != nil {
		return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w", namespace, quote.Limited(string(id)), err)
	}
	if rec.ID != string(id) {
		return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w: it names itself %s",
			namespace, quote.Limited(string(id)), storage.ErrCorrupt, quote.Limited(rec.ID))
	}
	return rec, nil
}

// Get implements [storage.Store].
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := s.check(ctx, "Get"); err != nil {
		return storage.Record{}, err
	}
	if err := storage.ValidateID(id); err != nil {
		return storage.Record{}, err
	}
	if l, ok := s.db.overlay.get(s.namespace, id); ok {
		return s.found(id, l.data) // no bytes: deleted
	}
	// Not in the log: bbolt holds the latest write, unless one comes
	// after this read began, which is as good as after it returned.
	var rec storage.Record
	err := s.db.view("read", func(tx *bolt.Tx) error {
		_, records, _ := s.buckets(tx)
		data, err := s.lookupBucket(records, id)
		if err != nil {
			return err
		}
		rec, err = s.found(id, data)
		return err
	})
	return rec, err
}

// Create implements [storage.Store].
func (s *Store) Create(ctx context.Context, rec storage.Record) (storage.Record, error) {
	if err := s.check(ctx, "Create"); err != nil {
		return storage.Record{}, err
	}
	if err := rec.Validate(); err != nil {
		return storage.Record{}, err
	}
	return s.write(ctx, func(v *batchView) (storage.Record, error) {
		if data, err := v.lookup(s, rec.ID); err != nil {
			return storage.Record{}, err
		} else if data != nil {
			return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w", s.namespace, quote.Limited(rec.ID), storage.ErrExists)
		}
		rec.Revision = 0 // a new record: no floor
		return rec, nil
	})
}

// CompareAndSwap implements [storage.Store].
func (s *Store) CompareAndSwap(ctx context.Context, id string, expect uint64, next storage.Record) (storage.Record, error) {
	if err := s.check(ctx, "CompareAndSwap"); err != nil {
		return storage.Record{}, err
	}
	if next.ID != id {
		return storage.Record{}, fmt.Errorf("boltstore: CompareAndSwap %s: %w: record id is %s", quote.Limited(id), storage.ErrInvalidRecord, quote.Limited(next.ID))
	}
	if err := next.Validate(); err != nil {
		return storage.Record{}, err
	}
	return s.write(ctx, func(v *batchView) (storage.Record, error) {
		cur, err := s.head(v, id)
		if err != nil {
			return storage.Record{}, err
		}
		if cur.revision != expect {
			full, err := s.current(v, id)
			if err != nil {
				return storage.Record{}, err
			}
			return storage.Record{}, &storage.ConflictError{ID: id, Expected: expect, Current: full}
		}
		if next.Claim() != cur.claim {
			return storage.Record{}, storage.ClaimChanged(id, cur.claim, next.Claim())
		}
		next.Revision = cur.revision
		return next, nil
	})
}

// current reads record id as a batch's write sees it. A record that does
// not decode is an error: it is never overwritten.
func (s *Store) current(v *batchView, id string) (storage.Record, error) {
	data, err := v.lookup(s, id)
	if err != nil {
		return storage.Record{}, err
	}
	return s.found(id, data)
}

// found decodes the bytes lookup found for id.
func (s *Store) found(id string, data []byte) (storage.Record, error) {
	if data == nil {
		return storage.Record{}, fmt.Errorf("boltstore: namespace %q, record %s: %w", s.namespace, quote.Limited(id), storage.ErrNotFound)
	}
	return s.decode(id, data)
}

// lookupBucket returns the bytes bbolt holds for id, nil if there are
// none. A bucket where a record belongs (a foreign writer) is
// ErrCorrupt, not "no record": it is not overwritten either.
func (s *Store) lookupBucket(records *bolt.Bucket, id string) ([]byte, error) {
	if records.Bucket([]byte(id)) != nil {
		return nil, fmt.Errorf("boltstore: namespace %q, record %s: %w: a bucket, not a record", s.namespace, quote.Limited(id), storage.ErrCorrupt)
	}
	return records.Get([]byte(id)), nil
}

// logWrite appends to the watch log and keeps it at LogSize entries,
// trimming the oldest as it goes: O(1) on every write, not just on
// average.
func logWrite(ns, log *bolt.Bucket, rev uint64, id string, logSize int) error {
	if err := log.Put(putUint(rev), []byte(id)); err != nil {
		return err
	}
	count := getUint(ns.Get(logCountKey)) + 1
	if count > uint64(logSize) {
		// Trim a little on every write instead of half the log at once:
		// deleting logSize keys in one transaction every logSize writes
		// made that one write, and the batch it belongs to, the slowest
		// of all. Two per write is enough to bring back a log that grew
		// past its size (one opened with a smaller LogSize).
		c := log.Cursor()
		var dropped uint64
		k, _ := c.First()
		for trimmed := 0; k != nil && count > uint64(logSize) && trimmed < 2; trimmed++ {
			dropped = getUint(k)
			if err := c.Delete(); err != nil {
				return err
			}
			count--
			k, _ = c.First()
		}
		if dropped != 0 {
			if err := ns.Put(droppedKey, putUint(dropped)); err != nil {
				return err
			}
		}
	}
	return ns.Put(logCountKey, putUint(count))
}

// List implements [storage.Lister]. A record that does not decode is
// listed apart, naming it, and the others are listed as usual. The
// records are those of one revision.
func (s *Store) List(ctx context.Context) ([]storage.Record, []storage.Unreadable, error) {
	if err := s.check(ctx, "List"); err != nil {
		return nil, nil, err
	}
	var out []storage.Record
	var bad []storage.Unreadable
	err := s.db.consistent("read", s.namespace, func(tx *bolt.Tx, logged map[string]logged, _ uint64) error {
		// The values are bbolt's pages, decoded (on other goroutines,
		// while the cursor goes on) before the transaction ends.
		decoding := listdecode.NewPipeline(func(id, value []byte) (storage.Record, error) {
			return decodeRecord(s.namespace, id, value)
		}, func(id []byte, err error) storage.Unreadable {
			return storage.Unreadable{ID: string(id), Err: err}
		})
		bad = bad[:0]
		_, records, _ := s.buckets(tx)
		err := records.ForEach(func(k, v []byte) error {
			if l, ok := logged[string(k)]; ok {
				if !l.gone {
					decoding.Add(k, l.data)
				}
				delete(logged, string(k))
				return nil
			}
			if v == nil { // a nested bucket where a record belongs
				_, err := s.lookupBucket(records, string(k))
				bad = append(bad, storage.Unreadable{ID: string(k), Err: err})
				return nil
			}
			decoding.Add(k, v)
			return nil
		})
		if err != nil {
			decoding.Wait() // nothing may read bbolt's pages once the transaction ends
			return err
		}
		for id, l := range logged { // new since bbolt last had the log applied
			if !l.gone {
				decoding.Add([]byte(id), l.data)
			}
		}
		var unreadable []storage.Unreadable
		out, unreadable = decoding.Wait()
		bad = append(bad, unreadable...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(out, func(a, b storage.Record) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(bad, func(a, b storage.Unreadable) int { return strings.Compare(a.ID, b.ID) })
	return out, bad, nil
}

// consistent runs fn with a read transaction and the writes of namespace
// in the log that it does not hold (the latest of each record): the
// store at one revision (see overlay.go). fn may run more than once.
func (db *DB) consistent(op, namespace string, fn func(tx *bolt.Tx, logged map[string]logged, revision uint64) error) error {
	var logged map[string]logged
	var revision uint64
	return db.atOneRevision(op, func() uint64 {
		logged, revision = db.overlay.records(namespace)
		return revision
	}, func(tx *bolt.Tx, counter uint64) error {
		for id, l := range logged {
			if l.revision <= counter {
				delete(logged, id) // applied: bbolt has it
			}
		}
		return fn(tx, logged, revision)
	})
}

// atOneRevision runs take, which copies what a read needs from the gens
// and returns the revision they are at, then fn in a read transaction
// with the revision bbolt holds every write up to; both again if a
// checkpoint landed between them (see overlay.go).
func (db *DB) atOneRevision(op string, take func() uint64, fn func(tx *bolt.Tx, counter uint64) error) error {
	for {
		revision := take()
		again := false
		err := db.view(op, func(tx *bolt.Tx) error {
			counter := counterIn(tx)
			if counter > revision {
				again = true
				return nil
			}
			return fn(tx, counter)
		})
		if !again {
			return err
		}
	}
}

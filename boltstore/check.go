package boltstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
	bolt "go.etcd.io/bbolt"
)

// Check reads the whole file, every bucket and every key and value of it,
// decodes every record of every namespace, reads the log's segments
// again and makes sure the ones the store writes to are still there
// under their names, returning every problem it finds, joined (each
// matching storage.ErrCorrupt); nil means everything reads. The file's
// pages are read and checked as Open checks them before bbolt reads
// them: damage done to the file while it is open is reported, not
// handed to bbolt, which trusts the pages it reads. It is not bbolt's
// Tx.Check, which runs in a goroutine of its own where a damaged page's
// panic cannot be recovered and kills the process.
func (db *DB) Check() error {
	if db.bolt == nil {
		return errZeroDB
	}
	var errs []error
	var damaged error
	err := db.view("Check", func(tx *bolt.Tx) error {
		// Inside the transaction: bbolt keeps the pages it reaches
		// from being reused while the walk reads them.
		if damaged = filecheck.ValidateOpen(db.path); damaged != nil {
			return nil
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return checkBucket(b, name, &errs)
		})
	})
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, db.checkLog())
	unnamed := false
	for _, g := range db.overlay.snapshot() {
		// A gen still in the overlay after its segment failed the look
		// was not applied yet: the checkpointer drops a gen before it
		// removes its segment.
		if g.seg != nil {
			if err := g.seg.StillNamed(); err != nil && slices.Contains(db.overlay.snapshot(), g) && !db.isClosed() {
				errs = append(errs, err)
				unnamed = unnamed || errors.Is(err, wal.ErrUnnamed)
			}
		}
	}
	if unnamed && !db.readOnly {
		// Found here before a write found it: the writes acknowledged
		// into the removed segment go to the file now, as a write's
		// finding would have them.
		db.writer <- struct{}{}
		db.fail(errs[len(errs)-1])
		db.rescue()
		<-db.writer
	}
	if damaged != nil {
		return errors.Join(append(errs, fmt.Errorf("boltstore: Check %s: %w", db.path, damaged))...)
	}
	stores, err := db.namespaces()
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range stores {
		if _, bad, err := s.List(context.Background()); err != nil {
			errs = append(errs, err)
		} else {
			for _, u := range bad {
				errs = append(errs, u.Err)
			}
		}
	}
	return errors.Join(errs...)
}

// Namespaces returns the names of the namespaces the file holds, and of
// those opened since with Store, sorted: what an operator's tool offers
// when asked for one the file does not hold.
func (db *DB) Namespaces() ([]string, error) {
	if db.bolt == nil {
		return nil, errZeroDB
	}
	stores, err := db.namespaces()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(stores))
	for _, s := range stores {
		names = append(names, s.namespace)
	}
	slices.Sort(names)
	return names, nil
}

// namespaces returns a Store for every namespace the file holds, and
// for those opened since: Check decodes the records of all of them, not
// only of those this process happens to have opened.
func (db *DB) namespaces() ([]*Store, error) {
	db.mu.Lock()
	byName := maps.Clone(db.stores)
	db.mu.Unlock()
	err := db.view("Check", func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			namespace, ok := strings.CutPrefix(string(name), "ns/")
			if !ok || byName[namespace] != nil || b.Bucket(recordsKey) == nil || wal.CheckNamespace(namespace) != nil {
				return nil
			}
			byName[namespace] = &Store{db: db, namespace: namespace, bucket: []byte("ns/" + namespace)}
			return nil
		})
	})
	return slices.Collect(maps.Values(byName)), err
}

// checkBucket reads every key and value under b.
func checkBucket(b *bolt.Bucket, path []byte, errs *[]error) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			child := b.Bucket(k)
			if child == nil {
				*errs = append(*errs, fmt.Errorf("%w: %s/%s: neither a value nor a bucket", filecheck.ErrDamaged, path, k))
				return nil
			}
			return checkBucket(child, append(append(append([]byte(nil), path...), '/'), k...), errs)
		}
		return nil
	})
}

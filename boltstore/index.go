package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/execfsm/execfsm/storage"
	bolt "go.etcd.io/bbolt"
)

// The status index: what lets a page of a few statuses (a controller's
// live executions) cost those records and not the million ended ones
// beside them. Two buckets in each namespace's, written by the
// checkpoint in the transaction that applies the records: status-of
// maps an id to its record's status, and by-status holds a key per
// record, its status (length first) then its id, so that the records of
// one status are one range of keys in id order. The log's writes not
// yet applied carry their status in memory (logged.status); a read
// merges the two, as every read merges the log with the file.
var (
	statusOfKey = []byte("status-of")
	byStatusKey = []byte("by-status")
)

// statusIndex is a namespace's index, in a write transaction.
type statusIndex struct{ statusOf, byStatus *bolt.Bucket }

// openIndex returns the namespace's status index, making it from the
// records when the namespace has none yet (a file an older build
// wrote): once, in the transaction that first writes the namespace.
func openIndex(ns, records *bolt.Bucket) (statusIndex, error) {
	if x := (statusIndex{ns.Bucket(statusOfKey), ns.Bucket(byStatusKey)}); x.statusOf != nil && x.byStatus != nil {
		return x, nil
	}
	statusOf, err := ns.CreateBucketIfNotExists(statusOfKey)
	if err != nil {
		return statusIndex{}, err
	}
	byStatus, err := ns.CreateBucketIfNotExists(byStatusKey)
	if err != nil {
		return statusIndex{}, err
	}
	x := statusIndex{statusOf, byStatus}
	err = records.ForEach(func(k, v []byte) error {
		var rec storage.Record
		if v == nil || rec.UnmarshalBinary(v) != nil {
			return nil // unreadable: listed unfiltered only, as apart
		}
		return x.set(string(k), rec.Status)
	})
	return x, err
}

// readIndex returns the namespace's index buckets for a read: nil ones
// for a namespace without records (nothing to index yet), an error for
// a file an older build wrote, which has records and no index.
func (s *Store) readIndex(ns, records *bolt.Bucket) (statusOf, byStatus *bolt.Bucket, err error) {
	statusOf, byStatus = ns.Bucket(statusOfKey), ns.Bucket(byStatusKey)
	if statusOf == nil || byStatus == nil {
		if k, _ := records.Cursor().First(); k != nil {
			return nil, nil, fmt.Errorf("boltstore: namespace %q: the file has no status index (an older build wrote it): open it writable once to build it", s.namespace)
		}
		return nil, nil, nil
	}
	return statusOf, byStatus, nil
}

// set makes the index say record id is in status ("" for a record
// deleted).
func (x statusIndex) set(id, status string) error {
	old := x.statusOf.Get([]byte(id))
	if old != nil && string(old) == status {
		return nil
	}
	if old != nil {
		if err := x.byStatus.Delete(indexKey(string(old), id)); err != nil {
			return err
		}
	}
	if status == "" {
		if old == nil {
			return nil
		}
		return x.statusOf.Delete([]byte(id))
	}
	if err := x.byStatus.Put(indexKey(status, id), []byte{}); err != nil {
		return err
	}
	return x.statusOf.Put([]byte(id), []byte(status))
}

// statusPrefix starts every index key of status: its length, then it.
func statusPrefix(status string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(status))), status...)
}

// indexKey is the by-status key of record id in status.
func indexKey(status, id string) []byte {
	return append(statusPrefix(status), id...)
}

// idsAfter returns up to n ids of status after cursor, in order, from
// the index; skip says which to leave out (those the log has newer
// writes of).
func idsAfter(byStatus *bolt.Bucket, status, cursor string, n int, skip func(id string) bool) []string {
	prefix := statusPrefix(status)
	var out []string
	c := byStatus.Cursor()
	for k, _ := c.Seek(append(bytes.Clone(prefix), cursor...)); k != nil && bytes.HasPrefix(k, prefix) && len(out) < n; k, _ = c.Next() {
		id := string(k[len(prefix):])
		if id <= cursor || skip(id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

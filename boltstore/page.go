package boltstore

import (
	"bytes"
	"context"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"
	bolt "go.etcd.io/bbolt"
)

// ListPage implements [storage.PageLister]: a page of the records, or of
// those in the statuses asked, read from the status index (see
// index.go) and the log's writes not yet applied, at one revision. The
// cursor is the last id of the page before. A page of a few statuses
// reads their index ranges and their records only.
func (s *Store) ListPage(ctx context.Context, q storage.Query) (storage.Page, error) {
	if err := s.check(ctx, "ListPage"); err != nil {
		return storage.Page{}, err
	}
	if err := q.Validate(); err != nil {
		return storage.Page{}, err
	}
	statuses := slices.Clone(q.Statuses)
	slices.Sort(statuses)
	statuses = slices.Compact(statuses)
	var page storage.Page
	err := s.db.consistent("read", s.namespace, func(tx *bolt.Tx, logged map[string]logged, _ uint64) error {
		ns, records, _ := s.buckets(tx)
		ids, err := s.pageIDs(ns, records, logged, statuses, q)
		if err != nil {
			return err
		}
		page = storage.Page{}
		if len(ids) > q.Limit {
			ids = ids[:q.Limit]
			page.Next = ids[len(ids)-1]
		}
		decoding := listdecode.NewPipeline(func(id, value []byte) (storage.Record, error) {
			return decodeRecord(s.namespace, id, value)
		}, func(id []byte, err error) storage.Unreadable {
			return storage.Unreadable{ID: string(id), Err: err}
		})
		for _, id := range ids {
			if l, ok := logged[id]; ok {
				decoding.Add([]byte(id), l.data)
				continue
			}
			data, err := s.lookupBucket(records, id)
			if err != nil {
				page.Unreadable = append(page.Unreadable, storage.Unreadable{ID: id, Err: err})
				continue
			}
			decoding.Add([]byte(id), data)
		}
		var unreadable []storage.Unreadable
		page.Records, unreadable = decoding.Wait() // before the transaction ends: the values are bbolt's pages
		page.Unreadable = append(page.Unreadable, unreadable...)
		return nil
	})
	if err != nil {
		return storage.Page{}, err
	}
	slices.SortFunc(page.Records, func(a, b storage.Record) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(page.Unreadable, func(a, b storage.Unreadable) int { return strings.Compare(a.ID, b.ID) })
	return page, nil
}

// pageIDs returns up to q.Limit+1 ids of the page after q.Cursor, in
// order: from the records (or the index ranges of statuses) the file
// holds, and the log's writes not yet applied, which stand in for the
// file's.
func (s *Store) pageIDs(ns, records *bolt.Bucket, logged map[string]logged, statuses []string, q storage.Query) ([]string, error) {
	want := q.Limit + 1
	inLog := func(id string) bool { _, ok := logged[id]; return ok }
	var ids []string
	for id, l := range logged {
		if !l.gone && id > q.Cursor && (len(statuses) == 0 || slices.Contains(statuses, l.status)) {
			ids = append(ids, id)
		}
	}
	if len(statuses) == 0 {
		c := records.Cursor()
		var got int
		for k, _ := c.Seek([]byte(q.Cursor)); k != nil && got < want; k, _ = c.Next() {
			if id := string(k); id > q.Cursor && !inLog(id) {
				ids = append(ids, id)
				got++
			}
		}
	} else {
		_, byStatus, err := s.readIndex(ns, records)
		if err != nil {
			return nil, err
		}
		for _, status := range statuses {
			if byStatus != nil {
				ids = append(ids, idsAfter(byStatus, status, q.Cursor, want, inLog)...)
			}
		}
	}
	slices.Sort(ids)
	return ids[:min(len(ids), want)], nil
}

var _ storage.Counter = (*Store)(nil)

// CountStatuses implements [storage.Counter] at one revision: the keys
// of each status's index range in the file, corrected by the log's
// writes not yet applied (each one's status in the file, status-of, and
// its own).
func (s *Store) CountStatuses(ctx context.Context, statuses ...string) (map[string]int, error) {
	if err := s.check(ctx, "CountStatuses"); err != nil {
		return nil, err
	}
	if err := storage.CheckStatuses(statuses); err != nil {
		return nil, err
	}
	var out map[string]int
	err := s.db.consistent("read", s.namespace, func(tx *bolt.Tx, logged map[string]logged, _ uint64) error {
		out = make(map[string]int, len(statuses))
		ns, records, _ := s.buckets(tx)
		statusOf, byStatus, err := s.readIndex(ns, records)
		if err != nil {
			return err
		}
		for _, status := range statuses {
			out[status] = 0
			if byStatus == nil {
				continue
			}
			prefix := statusPrefix(status)
			c := byStatus.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				out[status]++
			}
		}
		for id, l := range logged {
			if statusOf != nil {
				if was := statusOf.Get([]byte(id)); was != nil {
					if _, counted := out[string(was)]; counted {
						out[string(was)]--
					}
				}
			}
			if _, counted := out[l.status]; counted && !l.gone {
				out[l.status]++
			}
		}
		return nil
	})
	return out, err
}

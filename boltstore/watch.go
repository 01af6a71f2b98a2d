package boltstore

import (
	"context"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/watchlog"
	bolt "go.etcd.io/bbolt"
)

// Watch implements [storage.Watcher]. Watches end when the DB closes.
func (s *Store) Watch(ctx context.Context, fromRevision uint64) (<-chan storage.WatchEvent, error) {
	if err := s.check(ctx, "Watch"); err != nil {
		return nil, err
	}
	return watchlog.Channel(ctx, &s.hub, boltLog{s}, fromRevision, func(e watchlog.Entry) storage.WatchEvent {
		return storage.WatchEvent{ID: e.ID, Revision: e.Revision}
	}), nil
}

type boltLog struct{ s *Store }

func (l boltLog) Since(rev uint64, limit int) ([]watchlog.Entry, bool, error) {
	var out, logged []watchlog.Entry
	compacted := false
	err := l.s.db.atOneRevision("watch", func() uint64 {
		var revision uint64
		logged, revision = l.s.db.overlay.since(l.s.namespace, rev)
		return revision
	}, func(tx *bolt.Tx, counter uint64) error {
		ns, _, log := l.s.buckets(tx)
		if rev < getUint(ns.Get(droppedKey)) {
			compacted = true
			return nil
		}
		c := log.Cursor()
		for k, v := c.Seek(putUint(rev + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) != 8 {
				continue // not a log entry (tampered): no event for a record that was never written
			}
			out = append(out, watchlog.Entry{ID: string(v), Revision: getUint(k)})
		}
		for _, e := range logged {
			if len(out) == limit {
				break
			}
			if e.Revision > counter {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, compacted, err
}

func (l boltLog) Snapshot() ([]watchlog.Entry, uint64, error) {
	var out []watchlog.Entry
	var rev uint64
	err := l.s.db.consistent("watch", l.s.namespace, func(tx *bolt.Tx, logged map[string]logged, revision uint64) error {
		out = out[:0]
		_, records, _ := l.s.buckets(tx)
		rev = revision
		err := records.ForEach(func(k, v []byte) error {
			e := watchlog.Entry{ID: string(k), Revision: rev}
			if lg, ok := logged[string(k)]; ok {
				delete(logged, string(k))
				if lg.gone {
					return nil
				}
				e.Revision = lg.revision
			} else if rec, err := l.s.decode(string(k), v); err == nil {
				e.Revision = rec.Revision
			} // a corrupt record is still announced: its reader gets the error
			out = append(out, e)
			return nil
		})
		for id, lg := range logged {
			if !lg.gone {
				out = append(out, watchlog.Entry{ID: id, Revision: lg.revision})
			}
		}
		return err
	})
	return out, rev, err
}

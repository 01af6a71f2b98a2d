package etcdstore

import (
	"context"
	"fmt"

	"github.com/execfsm/execfsm/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ storage.TableKeeper = (*Store)(nil)

// tableKey is where the table's document lives: beside the records'
// prefix, never under it, so List and Watch do not see it.
func (s *Store) tableKey() string { return s.prefix + "table" }

// Table implements [storage.TableKeeper]; the revision is the key's
// etcd mod revision.
func (s *Store) Table(ctx context.Context) ([]byte, uint64, error) {
	ctx, cancel, err := s.call(ctx, "Table")
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	resp, err := s.client.Get(ctx, s.tableKey())
	if err != nil {
		return nil, 0, wrap("Table", s.tableKey(), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("etcdstore: table: %w", storage.ErrNotFound)
	}
	return resp.Kvs[0].Value, uint64(resp.Kvs[0].ModRevision), nil
}

// SetTable implements [storage.TableKeeper] with a transaction on the
// key's mod revision (its absence for expect 0).
func (s *Store) SetTable(ctx context.Context, expect uint64, doc []byte) (uint64, error) {
	if err := storage.CheckTable(doc); err != nil {
		return 0, err
	}
	ctx, cancel, err := s.call(ctx, "SetTable")
	if err != nil {
		return 0, err
	}
	defer cancel()
	key := s.tableKey()
	cond := clientv3.Compare(clientv3.ModRevision(key), "=", int64(expect))
	if expect == 0 {
		cond = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	resp, err := s.client.Txn(ctx).If(cond).Then(clientv3.OpPut(key, string(doc))).Commit()
	if err != nil {
		return 0, wrap("SetTable", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcdstore: table: %w: not at revision %d", storage.ErrConflict, expect)
	}
	return uint64(resp.Header.Revision), nil
}

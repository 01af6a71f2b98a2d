package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/storage"

	bolt "go.etcd.io/bbolt"
)

// FuzzStoredRecord puts arbitrary bytes where a record belongs. Reading
// it must give a record or an error matching ErrCorrupt that names the
// id, never a panic; a compare-and-swap over it must leave the bytes as
// they were unless they decoded.
func FuzzStoredRecord(f *testing.F) {
	good, _ := storage.Record{ID: "ex-1", Status: "running", Revision: 3}.MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, '{', '}'})
	f.Add([]byte{2, '{', '}'})
	f.Add([]byte("\x01{\"id\":\"ex-2\",\"status\":\"running\",\"revision\":1,\"epoch\":0,\"updated_at\":\"2026-01-01T00:00:00Z\",\"since\":\"2026-01-01T00:00:00Z\"}"))
	db, err := Open(filepath.Join(f.TempDir(), "db"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	// What is fuzzed is decoding, not durability: an fsync per input
	// would make each one cost milliseconds, and stall behind any other
	// disk user.
	db.bolt.NoSync = true
	s, err := db.Store("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(s.bucket).Bucket(recordsKey).Put([]byte("ex-1"), data)
		})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx, "ex-1")
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			_, casErr := s.CompareAndSwap(ctx, "ex-1", 0, storage.Record{ID: "ex-1", Status: "failed"})
			if !errors.Is(casErr, storage.ErrCorrupt) {
				t.Fatalf("CompareAndSwap over a corrupt record: %v", casErr)
			}
			var after []byte
			_ = db.bolt.View(func(tx *bolt.Tx) error {
				after = append([]byte(nil), tx.Bucket(s.bucket).Bucket(recordsKey).Get([]byte("ex-1"))...)
				return nil
			})
			if string(after) != string(data) {
				t.Fatal("a corrupt record was overwritten")
			}
			return
		}
		if rec.ID != "ex-1" {
			t.Fatalf("decoded record names %q", rec.ID)
		}
		if err := rec.Validate(); err != nil {
			t.Fatalf("decoded an invalid record: %v", err)
		}
	})
}

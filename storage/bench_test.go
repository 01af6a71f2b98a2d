package storage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// fullRecord is a record at its steady size: a full default audit trail.
func fullRecord() storage.Record {
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	rec := storage.Record{ID: "ex-1", Status: "running", Previous: "paused", Revision: 40, Owner: "pod-a", Epoch: 2,
		UpdatedAt: at, Since: at, Reason: "toggle", Meta: map[string]string{"restarts": "1"}}
	entries := make([]storage.Entry, storage.DefaultHistoryLimit)
	for k := range entries {
		entries[k] = storage.Entry{From: "running", To: "paused", Reason: "toggle",
			Actor: "controller", Owner: "pod-a", Epoch: 2, At: at, Revision: uint64(20 + k)}
	}
	rec.History, _ = storage.NewTrail(entries...)
	return rec
}

// BenchmarkValidate checks a record with a full audit trail, as every
// store does on every write.
func BenchmarkValidate(b *testing.B) {
	rec := fullRecord()
	b.ReportAllocs()
	for range b.N {
		if err := rec.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryCompareAndSwap is the store's side of a persisted
// transition: validate, compare, keep a private copy.
func BenchmarkMemoryCompareAndSwap(b *testing.B) {
	ctx := context.Background()
	s := storage.NewMemory()
	rec := fullRecord()
	stored, err := s.Create(ctx, rec)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := range b.N {
		rec.Reason = fmt.Sprint(i & 1)
		if stored, err = s.CompareAndSwap(ctx, rec.ID, stored.Revision, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordMarshalBinary encodes a record with a full default
// audit trail, as every bolt, etcd and kube write does.
func BenchmarkRecordMarshalBinary(b *testing.B) {
	rec := fullRecord()
	b.ReportAllocs()
	for range b.N {
		if _, err := rec.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordUnmarshalBinary decodes it, as every read does.
func BenchmarkRecordUnmarshalBinary(b *testing.B) {
	data, err := fullRecord().MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for range b.N {
		var rec storage.Record
		if err := rec.UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}

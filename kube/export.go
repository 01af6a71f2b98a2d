package kube

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/execfsm/execfsm/archive"
	"github.com/execfsm/execfsm/storage"
)

// ExportInfo says what an export holds.
type ExportInfo struct {
	// ResourceVersion is the revision the export is the store at: its
	// ConfigMaps were listed at it, page after page.
	ResourceVersion uint64
	// Records is the number of records written.
	Records int
	// Unreadable are the records that could not be read, and so are not
	// in the export: repair them and export again, or accept their loss.
	Unreadable []storage.Unreadable
}

// Export writes every record of the store to w, at one revision (the
// list's pages are all served at the revision of the first), as JSON
// Lines in the archive's format (archive.NewReader reads it back; each
// line's reason is "exported"): the backup of a store kept in the
// Kubernetes API, which a cluster's own etcd backup holds too but mixed
// with everything else. Import restores it into another store. The
// records' Leases are not exported: who holds an execution is live
// state, and a restored store starts with nobody holding any.
func (s *Store) Export(ctx context.Context, w io.Writer) (ExportInfo, error) {
	recs, bad, rv, err := s.list(ctx)
	if err != nil {
		return ExportInfo{}, err
	}
	at, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return ExportInfo{}, fmt.Errorf("kube: Export: the list's resourceVersion %q is not a revision", rv)
	}
	now := time.Now().UTC()
	retired := make([]storage.Retired, len(recs))
	for k, rec := range recs {
		retired[k] = storage.Retired{Record: rec, Reason: "exported", At: now}
	}
	if err := archive.Write(w, retired); err != nil {
		return ExportInfo{}, fmt.Errorf("kube: Export: %w", err)
	}
	return ExportInfo{ResourceVersion: at, Records: len(recs), Unreadable: bad}, nil
}

// Import creates, in this store, every record an export (or an
// archive) holds, in the order read, each with its status, claim, trail
// and metadata, at a revision of this store. It stops at the first
// record it cannot create (one already there: storage.ErrExists), or the
// first line it cannot read, and returns how many it created: import into
// a namespace of its own.
func (s *Store) Import(ctx context.Context, r io.Reader) (int, error) {
	rd := archive.NewReader(r)
	n := 0
	for {
		kept, err := rd.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("kube: Import: %w", err)
		}
		if _, err := s.Create(ctx, kept.Record); err != nil {
			return n, fmt.Errorf("kube: Import: %w", err)
		}
		n++
	}
}

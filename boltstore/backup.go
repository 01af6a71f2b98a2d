package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
	bolt "go.etcd.io/bbolt"
)

// BackupInfo says what a backup holds.
type BackupInfo struct {
	// Revision is the revision the backup is the database at: every
	// write acknowledged up to it is in it, and none after.
	Revision uint64
	// Bytes is the size of the file written.
	Bytes int64
}

// Backup writes a copy of the database to path, a file that must not
// exist: the database at one revision, the log's writes folded in, a
// file [Open] opens like any other (and, opened, recovers from: copy it
// where a controller opens its store to restore it). Writers go on while
// it runs: the copy is read from a read transaction of bbolt (which
// holds the pages it reads, so the file may grow meanwhile) and the
// log's writes not yet applied, taken at the same revision (see
// overlay.go), and applied to the copy before it is flushed and renamed
// into place. A backup cut short (ctx ended, a full disk) leaves no file
// at path.
func (db *DB) Backup(ctx context.Context, path string) (BackupInfo, error) {
	if db.bolt == nil {
		return BackupInfo{}, errZeroDB
	}
	if db.isClosed() {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: %w", ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return BackupInfo{}, err
	}
	if _, err := os.Lstat(path); err == nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: %s: %w", path, os.ErrExist)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: %w", err)
	}
	defer func() {
		_ = tmp.Close() // closed already, unless the copy failed
		_ = os.Remove(tmp.Name())
	}()
	var logged *gen
	var counter, revision uint64
	err = db.atOneRevision("backup", func() uint64 {
		logged, revision = db.overlay.merged()
		return revision
	}, func(tx *bolt.Tx, c uint64) error {
		counter = c
		if _, err := tmp.Seek(0, 0); err != nil {
			return err
		}
		if err := tmp.Truncate(0); err != nil {
			return err
		}
		_, err := tx.WriteTo(tmp)
		return err
	})
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: copying the file: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return BackupInfo{}, err
	}
	revision = max(revision, counter)
	if err := foldIn(tmp.Name(), logged, counter, revision, db.logSize); err != nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: folding the log in: %w", err)
	}
	// A link, not a rename: a file made at path meanwhile is never
	// replaced (its error matches os.ErrExist); the temporary name goes.
	if err := os.Link(tmp.Name(), path); err != nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: %w", err)
	}
	if err := (wal.OS{}).SyncDir(filepath.Dir(path)); err != nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("boltstore: Backup: %w", err)
	}
	return BackupInfo{Revision: revision, Bytes: info.Size()}, nil
}

// foldIn applies the log's writes above counter to the copy at path and
// makes it a database without a log, at revision.
func foldIn(path string, logged *gen, counter, revision uint64, logSize int) error {
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: DefaultTimeout})
	if err != nil {
		return err
	}
	err = filecheck.Guard(path, "backup", func() error {
		return b.Update(func(tx *bolt.Tx) error {
			if err := applyGen(tx, logged, logSize, counter); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(metaBucket)
			if err != nil {
				return err
			}
			for _, key := range [][]byte{logFromKey, logPathKey} {
				if err := meta.Delete(key); err != nil {
					return err
				}
			}
			return meta.Put(revisionKey, putUint(revision))
		})
	})
	return errors.Join(err, b.Close()) // bbolt flushes the file on commit and close
}

// merged returns the writes of every gen as one, newer writes over older
// ones, and the revision they are as of: what a backup folds into the
// file it copies.
func (o *overlay) merged() (*gen, uint64) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := newGen(nil)
	for _, g := range o.gens {
		for ns, ids := range g.records {
			if out.records[ns] == nil {
				out.records[ns] = map[string]logged{}
			}
			for id, l := range ids {
				out.records[ns][id] = l
			}
		}
		for ns, log := range g.logs {
			out.logs[ns] = append(out.logs[ns], log...)
		}
		for ns, l := range g.tables {
			out.tables[ns] = l
		}
		for ns, floor := range g.floors {
			if out.floors == nil {
				out.floors = map[string]uint64{}
			}
			out.floors[ns] = max(out.floors[ns], floor)
		}
		out.last = max(out.last, g.last)
	}
	return out, o.revision
}

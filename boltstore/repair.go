package boltstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/execfsm/execfsm/boltstore/internal/filecheck"
	"github.com/execfsm/execfsm/boltstore/internal/wal"
	bolt "go.etcd.io/bbolt"
)

// LogDamage is what [InspectLog] finds wrong with a database's
// write-ahead log, and exactly what [RepairLog] would drop to mend it:
// the log is kept up to its last good frame, and everything after it
// goes. Open refuses a damaged log and never repairs it on its own:
// every write the log holds was acknowledged, and dropping one is the
// operator's decision, taken knowing which.
type LogDamage struct {
	// Problem is what is wrong, as Open says it.
	Problem string `json:"problem"`
	// Segment and Offset are where the log stops being good: it is kept
	// up to Offset in Segment, and every segment after goes. Segment is
	// empty when only the file's reference to its log is mended.
	Segment string `json:"segment,omitempty"`
	Offset  int64  `json:"offset"`
	// Dropped are the acknowledged writes the repair drops that can
	// still be read, oldest first: the records they wrote keep their
	// state before them.
	Dropped []DroppedWrite `json:"dropped"`
	// UnreadableBytes is how much of what is dropped cannot be read as
	// frames, so its writes cannot be named (zeros at the end of the
	// last segment, a torn write never acknowledged, are not counted).
	UnreadableBytes int64 `json:"unreadable_bytes"`
	// MissingFrom to MissingTo are revisions no segment holds: writes
	// already lost, whose ids nothing records. Zero when none are.
	MissingFrom uint64 `json:"missing_from,omitempty"`
	MissingTo   uint64 `json:"missing_to,omitempty"`
	// LogMissing is the segment the file names as holding writes it does
	// not, when it is not beside it; the repair makes the file stop
	// naming it, and every write in it is lost.
	LogMissing string `json:"log_missing,omitempty"`
	// Fingerprint identifies the log as it was inspected: RepairLog
	// repairs only a log that still has it.
	Fingerprint string `json:"fingerprint"`
}

// DroppedWrite is one acknowledged write a repair drops.
type DroppedWrite struct {
	Revision  uint64 `json:"revision"`
	Namespace string `json:"namespace"`
	// ID is the record's; empty for a write of the namespace's table
	// document (storage.TableKeeper).
	ID string `json:"id"`
}

// ErrLogChanged is matched by the error of [RepairLog] when the log is
// no longer as it was inspected: nothing was repaired.
var ErrLogChanged = errors.New("the log changed since it was inspected")

// InspectLog reads the write-ahead log of the database at path, as Open
// would, and returns what is wrong with it and what a repair would drop,
// or nil when nothing is. It changes nothing. It takes the file's lock
// shared, as a read-only Open does: a process holding the file for
// writing excludes it (ErrLocked). opts.Timeout bounds the wait.
func InspectLog(path string, opts Options) (*LogDamage, error) {
	var damage *LogDamage
	err := withFile(path, opts, true, func(b *bolt.DB, logPath string) error {
		var err error
		damage, _, err = inspectLog(b, wal.OS{}, logPath)
		return err
	})
	return damage, err
}

// RepairLog drops what [InspectLog] reported, once the log is still as
// inspected (fingerprint, from LogDamage.Fingerprint; otherwise the error
// matches ErrLogChanged and nothing is changed): it cuts the log at its
// last good frame, removes every segment after it, and makes the file
// name what is left. It returns what it dropped. The database then opens
// with the writes before the damage; those reported are gone. It takes
// the file's lock for writing, as Open does.
func RepairLog(path, fingerprint string, opts Options) (*LogDamage, error) {
	var damage *LogDamage
	err := withFile(path, opts, false, func(b *bolt.DB, logPath string) error {
		d, plan, err := inspectLog(b, wal.OS{}, logPath)
		switch {
		case err != nil:
			return err
		case d == nil:
			return fmt.Errorf("boltstore: RepairLog %s: %w: the log is not damaged any more", path, ErrLogChanged)
		case d.Fingerprint != fingerprint:
			return fmt.Errorf("boltstore: RepairLog %s: %w (fingerprint %s, not %s)", path, ErrLogChanged, d.Fingerprint, fingerprint)
		}
		if err := plan.carryOut(b, logPath); err != nil {
			return fmt.Errorf("boltstore: RepairLog %s: %w", path, err)
		}
		damage = d
		return nil
	})
	return damage, err
}

// withFile opens the bbolt file at path, checked as Open checks it,
// for fn.
func withFile(path string, opts Options, readOnly bool, fn func(b *bolt.DB, logPath string) error) error {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("boltstore: %s: %w", path, err)
	}
	b, err := openBolt(path, "open", 0o600, timeout, readOnly, true)
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", path, err)
	}
	defer b.Close()
	return fn(b, ownPath(path))
}

// repairPlan is what a repair does.
type repairPlan struct {
	cut     *wal.SegmentFile // the segment cut at offset; nil: none is
	offset  int64
	removed []wal.SegmentFile // every segment after it
	kept    []wal.SegmentFile // those before, and the cut one if anything of it stays
	// floor is the highest revision the dropped writes may have had:
	// the revisions handed out after the repair go above it.
	floor uint64
}

// missingLogRevisions is how far revisions jump past the file's when a
// repair accepts that its whole log is missing: nobody can say which
// revisions the writes in it had, and none may come round again.
const missingLogRevisions = 1 << 32

// inspectLog reads the log as Open does and, at the first thing that
// does not check out, stops: what comes after is what a repair drops.
func inspectLog(b *bolt.DB, fs wal.FS, logPath string) (*LogDamage, *repairPlan, error) {
	var counter, logFrom uint64
	var loggedAs string
	err := filecheck.Guard(logPath, "inspect", func() error {
		return b.View(func(tx *bolt.Tx) (err error) {
			counter, _, err = fileCounter(tx)
			logFrom, loggedAs = logFromIn(tx)
			return err
		})
	})
	if err != nil {
		return nil, nil, err
	}
	segments, err := wal.ListSegments(fs, logPath)
	if err != nil {
		return nil, nil, err
	}
	d := &LogDamage{}
	plan := &repairPlan{}
	if err := logFound(logPath, loggedAs, segments, logFrom); err != nil {
		d.Problem, d.LogMissing = err.Error(), wal.SegmentPath(orDefault(loggedAs, logPath), logFrom)
	}
	segs, err := wal.ReadSegments(fs, segments, false)
	if err != nil {
		return nil, nil, err
	}
	digest := sha256.New()
	fmt.Fprintf(digest, "%d %d %s\n", counter, logFrom, loggedAs)
	for _, sd := range segs {
		fmt.Fprintf(digest, "%s %d\n", sd.Path, len(sd.Data))
		digest.Write(sd.Data)
	}
	good, faults := wal.Scan(segs, counter)
	cutAt, last := -1, uint64(0)
	if len(good) > 0 {
		last = good[len(good)-1].Revision
	}
	if len(faults) > 0 {
		f := faults[0]
		cutAt, plan.offset = f.Segment, int64(f.Offset)
		d.Problem, d.MissingFrom, d.MissingTo = f.Err.Error(), f.MissingFrom, f.MissingTo
	}
	if cutAt < 0 && d.LogMissing == "" {
		return nil, nil, nil
	}
	plan.floor = max(counter, last, d.MissingTo)
	if d.LogMissing != "" {
		plan.floor = max(plan.floor, counter+missingLogRevisions)
	}
	if cutAt >= 0 {
		plan.cut = &segments[cutAt]
		d.Segment, d.Offset = segments[cutAt].Path, plan.offset
		plan.kept, plan.removed = segments[:cutAt], segments[cutAt+1:]
		if plan.offset > int64(len(wal.Magic)) {
			plan.kept = segments[:cutAt+1]
		}
		for i := cutAt; i < len(segments); i++ {
			from := len(wal.Magic)
			if i == cutAt {
				from = max(from, int(plan.offset))
			}
			entries, unreadable := wal.Salvage(segs[i].Data, from)
			d.UnreadableBytes += int64(unreadable)
			for _, e := range entries {
				plan.floor = max(plan.floor, e.Revision)
				if e.Revision > counter {
					d.Dropped = append(d.Dropped, DroppedWrite{Revision: e.Revision, Namespace: e.Namespace, ID: e.ID})
				}
			}
		}
	} else {
		plan.kept = segments
	}
	// A write is more than a byte: the writes in bytes no frame could be
	// read from took at most that many revisions.
	plan.floor += uint64(d.UnreadableBytes)
	d.Fingerprint = hex.EncodeToString(digest.Sum(nil))[:16]
	return d, plan, nil
}

// carryOut cuts and removes what the plan says, then makes the file name
// the oldest segment left, or none.
func (p *repairPlan) carryOut(b *bolt.DB, logPath string) error {
	if p.cut != nil && len(p.kept) > 0 && p.kept[len(p.kept)-1] == *p.cut {
		if err := os.Truncate(p.cut.Path, p.offset); err != nil {
			return err
		}
		f, err := os.OpenFile(p.cut.Path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		err = wal.Fdatasync(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else if p.cut != nil {
		p.removed = append([]wal.SegmentFile{*p.cut}, p.removed...)
	}
	var logFrom uint64
	if len(p.kept) > 0 {
		logFrom = p.kept[0].Seq
	}
	// The file names what stays before anything goes.
	err := filecheck.Guard(logPath, "repair", func() error {
		return b.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(metaBucket)
			if err != nil {
				return err
			}
			if err := meta.Put(logPathKey, []byte(logPath)); err != nil {
				return err
			}
			if err := meta.Put(revisionFloorKey, putUint(max(p.floor, getUint(meta.Get(revisionFloorKey))))); err != nil {
				return err
			}
			return meta.Put(logFromKey, putUint(logFrom))
		})
	})
	if err != nil {
		return err
	}
	for _, sf := range p.removed {
		if err := os.Remove(sf.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return wal.OS{}.SyncDir(filepath.Dir(logPath))
}

func orDefault(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

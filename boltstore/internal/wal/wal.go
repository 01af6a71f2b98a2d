// Package wal is boltstore's write-ahead log. A write is acknowledged once it is in the log and
// the log is fdatasynced: one sequential append and one flush per batch,
// where committing the batch to bbolt rewrites every B+tree page its
// writes touch, scattered over the file, with two flushes (on the
// machine the benchmarks ran on, 0.2 ms against 1.0 to 1.3 ms a batch).
// The log is applied to bbolt later, many batches in one transaction, by
// a checkpoint (boltstore's overlay); until then reads find the logged writes
// in memory. Etcd's backend works the same way.
//
// The log is a series of segment files beside the database,
// "<path>.wal-<16 hex digits>", applied and removed in order. A segment
// starts with [Magic] and holds frames, one per batch:
//
//	length uint32, little-endian: of the payload
//	crc    uint32, little-endian: CRC-32C of the payload
//	payload: one or more entries, each
//	    uvarint revision, then namespace, id and record, each as a
//	    uvarint length and its bytes (the record as MarshalBinary writes it)
//
// A delete is an entry whose record is a tombstone: a zero byte (no
// record's format is zero) and the uvarint epoch the deleted record had,
// which the namespace's epoch floor keeps (see [Tombstone]).
//
// A frame is written with one write(2) and flushed before any of its
// writes is acknowledged, and before the next frame is written. A crash
// or a power cut leaves at most the last frame of the last segment not
// wholly on the disk: a torn tail, never acknowledged, which boltstore.Open drops
// (see [ReadSegment] for the states a disk may leave it in). A frame that
// does not check out with a whole frame after it, or one whose checksum
// holds but whose entries do not decode, is damage to acknowledged
// writes, and so is a gap in the revisions the log holds beyond the
// file's (a segment removed, or cut short at a frame's end, with a later
// one after it): Open refuses the log with ErrCorrupt and leaves it as
// it is.
package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/quote"
)

const (
	Magic           = "execfsm-wal\x00\x00\x01"
	Suffix          = ".wal-"
	FrameHeaderSize = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one logged write.
type Entry struct {
	Revision  uint64
	Namespace string
	ID        string
	Data      []byte
	// Status is the record's status, which the store's index keeps: set
	// by the writer, and by ReadSegment from the record it decodes; ""
	// for a delete and a table. It is not written: the record holds it.
	Status string
	Frame  int // the offset of its frame in its segment
}

// TableID is the id of an entry that holds a namespace's table document
// instead of a record: no record's id is empty.
const TableID = ""

// tombstoneFormat is the first byte of a delete's record: MarshalBinary
// never writes it, so a tombstone is never taken for a record.
const tombstoneFormat = 0

// Tombstone returns the record of a delete entry for a record whose
// epoch was epoch.
func Tombstone(epoch uint64) []byte {
	return binary.AppendUvarint([]byte{tombstoneFormat}, epoch)
}

// DeletedEpoch returns the epoch a delete entry's record carries, and
// false for a record's bytes (or a table's, which are not entries of a
// record id).
func DeletedEpoch(data []byte) (uint64, bool) {
	if len(data) == 0 || data[0] != tombstoneFormat {
		return 0, false
	}
	epoch, n := binary.Uvarint(data[1:])
	if n <= 0 || 1+n != len(data) {
		return 0, false
	}
	return epoch, true
}

// AppendEntry appends e's encoding to a frame's payload.
func AppendEntry(buf []byte, revision uint64, namespace, id string, data []byte) []byte {
	buf = binary.AppendUvarint(buf, revision)
	buf = binary.AppendUvarint(buf, uint64(len(namespace)))
	buf = append(buf, namespace...)
	buf = binary.AppendUvarint(buf, uint64(len(id)))
	buf = append(buf, id...)
	buf = binary.AppendUvarint(buf, uint64(len(data)))
	return append(buf, data...)
}

// SealFrame fills in the header of frame, whose first FrameHeaderSize
// bytes were left for it.
func SealFrame(frame []byte) {
	payload := frame[FrameHeaderSize:]
	binary.LittleEndian.PutUint32(frame[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
}

// SegmentContents is what ReadSegment finds in a segment.
type SegmentContents struct {
	Entries []Entry
	// Torn is true if the segment ends in a frame that was never wholly
	// written: a write that was never acknowledged; end is where that
	// frame starts (the length of the data otherwise).
	Torn bool
	End  int
}

// ErrUnnamed is matched by the error of a segment whose name no longer
// leads to it (StillNamed): removed or replaced behind the store's back,
// it will not be there after a crash.
var ErrUnnamed = errors.New("log segment no longer under its name")

// ErrDamaged is damage to the log, rather than to one record: it
// matches storage.ErrCorrupt, and its text says it is the log.
var ErrDamaged error = damagedLog{}

type damagedLog struct{}

func (damagedLog) Error() string { return "damaged write-ahead log" }

// Is makes errors.Is(err, storage.ErrCorrupt) hold.
func (damagedLog) Is(target error) bool { return target == storage.ErrCorrupt }

// FrameDamage is damage found in a segment: the offset of the first
// byte that does not check out, and why. It matches storage.ErrCorrupt.
type FrameDamage struct {
	Offset int
	why    string
}

func (d *FrameDamage) Error() string { return ErrDamaged.Error() + ": " + d.why }
func (d *FrameDamage) Unwrap() error { return ErrDamaged }

func damageAt(offset int, format string, args ...any) error {
	return &FrameDamage{Offset: offset, why: fmt.Sprintf(format, args...)}
}

// ReadSegment decodes a segment's bytes. Each entry is checked as Open
// will trust it: a valid namespace and id, and a record that decodes,
// names itself by that id and carries that revision. The errors match
// storage.ErrCorrupt and give the offset of the frame.
//
// Every frame is written and flushed on its own, and acknowledged only
// once flushed, so only a segment's last frame can be unflushed when the
// power goes, and a disk may then leave it in any state: cut short,
// zeros where its first sector or page should be (the file grew before
// its data reached the disk), pages missing or reordered. A frame that
// does not check out is that torn tail if no whole frame follows it
// anywhere in the segment; if one does, the frame was flushed before it
// and was acknowledged, and the damage is refused.
func ReadSegment(data []byte) (SegmentContents, error) {
	var out SegmentContents
	if len(data) < len(Magic) {
		if strings.HasPrefix(Magic, string(data)) || AllZero(data) {
			out.Torn = true // cut short as it was created
			return out, nil
		}
		return out, damageAt(0, "not a write-ahead log segment")
	}
	if string(data[:len(Magic)]) != Magic {
		if AllZero(data) {
			out.Torn = true // created, its first bytes never flushed
			return out, nil
		}
		return out, damageAt(0, "not a write-ahead log segment (or one of a version this build does not read)")
	}
	var last uint64 // the last revision read, for telling a frame from noise
	off := len(Magic)
	for off < len(data) {
		rest := data[off:]
		payload, size, why := frameAt(rest)
		if why != "" {
			if wholeFrameIn(rest[1:], last) {
				return out, damageAt(off, "the frame at byte %d %s, and a whole frame follows it", off, why)
			}
			out.Torn, out.End = true, off // the last frame, never wholly written
			return out, nil
		}
		entries, err := decodeFrame(payload, off)
		if err != nil {
			return out, damageAt(off, "the frame at byte %d: %v", off, err)
		}
		out.Entries = append(out.Entries, entries...)
		last = entries[len(entries)-1].Revision
		off += size
	}
	out.End = off
	return out, nil
}

// decodeFrame decodes the entries of the frame at offset off.
func decodeFrame(payload []byte, off int) ([]Entry, error) {
	var out []Entry
	for len(payload) > 0 {
		e, more, err := decodeEntry(payload)
		if err != nil {
			return nil, err
		}
		e.Frame = off
		out = append(out, e)
		payload = more
	}
	return out, nil
}

// frameAt reads the frame at the start of b: its payload and its size
// with the header, or why it is not a whole frame.
func frameAt(b []byte) (payload []byte, size int, why string) {
	if len(b) < FrameHeaderSize {
		return nil, 0, "is cut short in its header"
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	switch {
	case n == 0:
		return nil, 0, "is empty (a zeroed header?)"
	case n > uint64(len(b)-FrameHeaderSize):
		return nil, 0, "runs past the end of the segment"
	}
	payload = b[FrameHeaderSize : FrameHeaderSize+n]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, "fails its checksum"
	}
	return payload, FrameHeaderSize + int(n), ""
}

// wholeFrameIn reports whether a whole frame starts anywhere in b: a
// header whose length fits, a payload beginning with a revision after
// last, and a checksum that holds. The length and the revision are
// checked first, so that the bytes of a torn frame are rarely summed.
func wholeFrameIn(b []byte, last uint64) bool {
	for j := 0; j+FrameHeaderSize < len(b); j++ {
		n := uint64(binary.LittleEndian.Uint32(b[j:]))
		if n == 0 || n > uint64(len(b)-j-FrameHeaderSize) {
			continue
		}
		payload := b[j+FrameHeaderSize : j+FrameHeaderSize+int(n)]
		if rev, k := binary.Uvarint(payload); k <= 0 || rev <= last {
			continue
		}
		if crc32.Checksum(payload, castagnoli) == binary.LittleEndian.Uint32(b[j+4:]) {
			return true
		}
	}
	return false
}

// decodeEntry decodes the entry at the start of payload.
func decodeEntry(payload []byte) (Entry, []byte, error) {
	var e Entry
	revision, n := binary.Uvarint(payload)
	if n <= 0 || revision == 0 {
		return e, nil, errors.New("an entry without a revision")
	}
	e.Revision = revision
	payload = payload[n:]
	field := func(name string) ([]byte, error) {
		size, n := binary.Uvarint(payload)
		if n <= 0 || size > uint64(len(payload)-n) {
			return nil, fmt.Errorf("revision %d: the %s runs past the frame", revision, name)
		}
		b := payload[n : n+int(size)]
		payload = payload[n+int(size):]
		return b, nil
	}
	namespace, err := field("namespace")
	if err != nil {
		return e, nil, err
	}
	id, err := field("id")
	if err != nil {
		return e, nil, err
	}
	data, err := field("record")
	if err != nil {
		return e, nil, err
	}
	e.Namespace, e.ID, e.Data = string(namespace), string(id), data
	if err := CheckNamespace(e.Namespace); err != nil {
		return e, nil, fmt.Errorf("revision %d: %v", revision, err)
	}
	if e.ID == TableID {
		// The namespace's table document (storage.TableKeeper): bytes
		// the store does not interpret, bounded as SetTable bounds them.
		if err := storage.CheckTable(data); err != nil {
			return e, nil, fmt.Errorf("revision %d, the table: %v", revision, err)
		}
		return e, payload, nil
	}
	if err := storage.ValidateID(e.ID); err != nil {
		return e, nil, fmt.Errorf("revision %d: %v", revision, err)
	}
	if len(data) > 0 && data[0] == tombstoneFormat {
		if _, ok := DeletedEpoch(data); !ok {
			return e, nil, fmt.Errorf("revision %d, record %s: a delete whose epoch does not decode", revision, quote.Limited(e.ID))
		}
		return e, payload, nil
	}
	var rec storage.Record
	if err := rec.UnmarshalBinary(data); err != nil {
		return e, nil, fmt.Errorf("revision %d, record %s: %v", revision, quote.Limited(e.ID), err)
	}
	if rec.ID != e.ID || rec.Revision != revision {
		return e, nil, fmt.Errorf("revision %d, record %s: the record says it is %s at revision %d", revision, quote.Limited(e.ID), quote.Limited(rec.ID), rec.Revision)
	}
	e.Status = rec.Status
	return e, payload, nil
}

// CheckNamespace says whether namespace is one DB.Store accepts.
func CheckNamespace(namespace string) error {
	if namespace == "" || len(namespace) > 128 || !utf8.ValidString(namespace) {
		return fmt.Errorf("namespace %q: want 1 to 128 bytes of UTF-8", namespace)
	}
	return nil
}

// AllZero reports whether b holds nothing but zeros: what a disk leaves
// where a file grew and its data never arrived.
func AllZero(b []byte) bool {
	return len(bytes.TrimLeft(b, "\x00")) == 0
}

// Segment is a log file being appended to.
type Segment struct {
	fs   FS
	f    File
	Path string
	Seq  uint64
	size int64
}

// SegmentPath names segment seq of the database at path: the names sort
// in the order the segments are applied.
func SegmentPath(path string, seq uint64) string {
	return fmt.Sprintf("%s%s%016x", path, Suffix, seq)
}

// SegmentFile is a segment found beside a database.
type SegmentFile struct {
	Path string
	Seq  uint64
}

// ListSegments returns the segments beside the database at path, oldest
// first.
func ListSegments(fs FS, path string) ([]SegmentFile, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []SegmentFile
	prefix := base + Suffix
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil || len(name) != 16 {
			continue // not one of ours: "<path>.wal-old" and the like
		}
		out = append(out, SegmentFile{Path: filepath.Join(dir, e.Name()), Seq: seq})
	}
	slices.SortFunc(out, func(a, b SegmentFile) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// CreateSegment creates segment seq, its header flushed and its name in
// the directory flushed too: a segment that vanished after a crash
// would take its acknowledged writes with it.
func CreateSegment(fs FS, path string, seq uint64, mode os.FileMode) (*Segment, error) {
	name := SegmentPath(path, seq)
	f, err := fs.Create(name, mode)
	if err != nil {
		return nil, err
	}
	s := &Segment{fs: fs, f: f, Path: name, Seq: seq}
	if err := s.Append([]byte(Magic)); err != nil {
		_ = f.Close()
		_ = fs.Remove(name)
		return nil, err
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		_ = fs.Remove(name)
		return nil, err
	}
	return s, nil
}

// Append writes b at the end of the segment and flushes it. On an error
// the segment is cut back to where it was, as far as that is possible;
// the caller stops writing to it either way.
func (s *Segment) Append(b []byte) error {
	if _, err := s.f.WriteAt(b, s.size); err != nil {
		_ = s.f.Truncate(s.size)
		return fmt.Errorf("boltstore: writing the log %s: %w", s.Path, err)
	}
	if err := s.f.Datasync(); err != nil {
		return fmt.Errorf("boltstore: flushing the log %s: %w", s.Path, err)
	}
	s.size += int64(len(b))
	// Before anything written here is acknowledged: a segment removed or
	// replaced behind the store's back would take it along at the next
	// crash.
	return s.StillNamed()
}

// StillNamed returns an error matching storage.ErrCorrupt unless the
// segment's name still leads to the file the store writes to.
func (s *Segment) StillNamed() error {
	named, err := s.fs.Named(s.f, s.Path)
	if err != nil {
		return fmt.Errorf("boltstore: the log %s: %w", s.Path, err)
	}
	if named {
		return nil
	}
	return fmt.Errorf("boltstore: %w: %w: the log %s the store writes to was removed or replaced while in use: writes stop, and every acknowledged write is applied to the file at once", ErrDamaged, ErrUnnamed, s.Path)
}

// Close closes the segment and leaves it beside the database: its writes
// are replayed by the next Open.
func (s *Segment) Close() error { return s.f.Close() }

// Remove closes and deletes the segment, once bbolt holds its writes.
func (s *Segment) Remove() error {
	_ = s.f.Close()
	return s.fs.Remove(s.Path)
}

package wal

import (
	"errors"
	"fmt"
	"os"
)

// SegmentData is a log segment and its bytes.
type SegmentData struct {
	SegmentFile
	Data []byte
}

// ReadSegments reads the segments listed, oldest first. One removed
// since it was listed (applied by a checkpoint meanwhile) is left out
// when skipGone says so, and is an error otherwise.
func ReadSegments(fs FS, segments []SegmentFile, skipGone bool) ([]SegmentData, error) {
	out := make([]SegmentData, 0, len(segments))
	for _, sf := range segments {
		data, err := fs.ReadFile(sf.Path)
		if skipGone && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the log %s: %w", sf.Path, err)
		}
		out = append(out, SegmentData{sf, data})
	}
	return out, nil
}

// Fault is something in the log that does not check out.
type Fault struct {
	// Segment is the index, among those scanned, of the segment it is
	// in, and Offset the byte of it where the segment stops being good.
	Segment int
	Offset  int
	// Err says what, naming the segment; it matches storage.ErrCorrupt.
	Err error
	// MissingFrom to MissingTo are the revisions a gap misses; zero for
	// a fault of another kind.
	MissingFrom, MissingTo uint64
}

// Scan decodes the segments, oldest first, as boltstore.Open trusts them
// against the file's counter: a torn tail only at the end of the last
// segment; revisions going up throughout; and the writes beyond the
// counter following it with no revision missing (every write takes the
// next revision, so a gap is a segment removed, or cut short at a
// frame's end with a later one after it, and acknowledged writes gone
// with it; below the counter the writes are in the file already, and a
// gap loses nothing). It returns the writes before the first fault, and
// every fault: after the first, only segments that do not decode.
func Scan(segs []SegmentData, counter uint64) ([]Entry, []Fault) {
	var entries []Entry
	var faults []Fault
	fault := func(i, offset int, err error) {
		faults = append(faults, Fault{Segment: i, Offset: offset, Err: fmt.Errorf("the log %s: %w", segs[i].Path, err)})
	}
	want, last := counter+1, uint64(0)
	for i, sd := range segs {
		contents, err := ReadSegment(sd.Data)
		// The entries first: they come before where the segment's own
		// damage, if any, starts. Past the first fault their order says
		// nothing.
		for _, e := range contents.Entries {
			if len(faults) > 0 {
				break
			}
			if e.Revision <= last {
				fault(i, e.Frame, damageAt(e.Frame, "revision %d follows revision %d", e.Revision, last))
				break
			}
			if e.Revision > counter && e.Revision != want {
				fault(i, e.Frame, damageAt(e.Frame, "the log misses revisions %d to %d, past the file's %d: a segment removed or cut short, with acknowledged writes in it", want, e.Revision-1, counter))
				faults[len(faults)-1].MissingFrom, faults[len(faults)-1].MissingTo = want, e.Revision-1
				break
			}
			if e.Revision > counter {
				want++
			}
			last = e.Revision
			entries = append(entries, e)
		}
		switch fd := (*FrameDamage)(nil); {
		case errors.As(err, &fd):
			fault(i, fd.Offset, err)
		case err != nil: // ReadSegment says where; this is for one that would not
			fault(i, len(Magic), err)
		case contents.Torn && i < len(segs)-1:
			fault(i, contents.End, damageAt(contents.End, "it is cut short, and a later segment follows it"))
		}
	}
	return entries, faults
}

// Salvage reads what whole frames it can find in data from offset from
// on, and counts the bytes in none of them (zeros at the end aside).
func Salvage(data []byte, from int) ([]Entry, int) {
	var out []Entry
	unreadable := 0
	if from > len(data) {
		return nil, 0
	}
	for off := from; off < len(data); {
		if AllZero(data[off:]) {
			break
		}
		if payload, size, why := frameAt(data[off:]); why == "" {
			if entries, err := decodeFrame(payload, off); err == nil {
				out = append(out, entries...)
				off += size
				continue
			}
		}
		unreadable++
		off++
	}
	return out, unreadable
}

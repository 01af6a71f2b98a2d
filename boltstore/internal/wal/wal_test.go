package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// segmentOf builds a segment holding one frame per batch.
func segmentOf(batches ...[]Entry) []byte {
	out := []byte(Magic)
	for _, batch := range batches {
		frame := make([]byte, FrameHeaderSize)
		for _, e := range batch {
			frame = AppendEntry(frame, e.Revision, e.Namespace, e.ID, e.Data)
		}
		SealFrame(frame)
		out = append(out, frame...)
	}
	return out
}

func entryOf(t testing.TB, revision uint64, id string) Entry {
	data, err := storage.Record{ID: id, Status: "running", Revision: revision}.MarshalBinary()
	require.NoError(t, err)
	return Entry{Revision: revision, Namespace: "executions", ID: id, Data: data}
}

// A frame whose checksum holds was written whole, by someone: entries
// that do not decode, or records that are not what the entry says, are
// damage (or a foreign writer), refused with ErrCorrupt, never read as
// a torn tail.
func TestFramesThatPassTheirChecksumButDoNotDecodeAreCorrupt(t *testing.T) {
	good := entryOf(t, 1, "ex-1")
	otherRecord := entryOf(t, 2, "ex-2")
	for name, tc := range map[string]struct {
		segment []byte
		want    string
	}{
		"an empty frame before another":   {segmentOf([]Entry{}, []Entry{good}), "empty"},
		"a record naming another id":      {segmentOf([]Entry{{Revision: 2, Namespace: "executions", ID: "ex-1", Data: otherRecord.Data}}), "says it is"},
		"a record at another revision":    {segmentOf([]Entry{{Revision: 7, Namespace: "executions", ID: "ex-2", Data: otherRecord.Data}}), "at revision 2"},
		"a record that does not decode":   {segmentOf([]Entry{{Revision: 1, Namespace: "executions", ID: "ex-1", Data: []byte{9, '{'}}}), "record \"ex-1\""},
		"a namespace that is not UTF-8":   {segmentOf([]Entry{{Revision: 1, Namespace: "exec\xff", ID: "ex-1", Data: good.Data}}), "UTF-8"},
		"an empty table document":         {segmentOf([]Entry{{Revision: 1, Namespace: "executions", ID: TableID, Data: nil}}), "revision 1, the table"},
		"a delete whose epoch is cut":     {segmentOf([]Entry{{Revision: 1, Namespace: "executions", ID: "ex-1", Data: []byte{0, 0x80}}}), "a delete whose epoch"},
		"a delete with bytes after it":    {segmentOf([]Entry{{Revision: 1, Namespace: "executions", ID: "ex-1", Data: append(Tombstone(3), 'x')}}), "a delete whose epoch"},
		"revision zero":                   {segmentOf([]Entry{{Revision: 0, Namespace: "executions", ID: "ex-1", Data: good.Data}}), "without a revision"},
		"a bad frame before a good frame": {append(bytes.Replace(segmentOf([]Entry{good}), []byte("running"), []byte("runnin!"), 1), segmentOf([]Entry{otherRecord})[len(Magic):]...), "checksum"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSegment(tc.segment)
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.ErrorContains(t, err, tc.want)
		})
	}
	contents, err := ReadSegment(segmentOf([]Entry{good, otherRecord}))
	require.NoError(t, err)
	table := Entry{Revision: 3, Namespace: "executions", ID: TableID, Data: []byte(`{"format":1}`)}
	withTable, err := ReadSegment(segmentOf([]Entry{good, table}))
	require.NoError(t, err, "the table's document is no record: opaque bytes")
	require.Len(t, withTable.Entries, 2)
	require.Equal(t, table.Data, withTable.Entries[1].Data)
	require.False(t, contents.Torn)
	good.Frame, otherRecord.Frame = len(Magic), len(Magic) // one frame, right after the magic
	good.Status, otherRecord.Status = "running", "running" // read from the records
	require.Equal(t, []Entry{good, otherRecord}, contents.Entries)
}

// A delete is an entry like a write, its record a tombstone that keeps
// the deleted record's epoch: the namespace's epoch floor is rebuilt from
// it when the log is replayed.
func TestADeleteIsAnEntryCarryingTheDeletedEpoch(t *testing.T) {
	write := entryOf(t, 1, "ex-1")
	deleted := Entry{Revision: 2, Namespace: "executions", ID: "ex-1", Data: Tombstone(7)}
	contents, err := ReadSegment(segmentOf([]Entry{write}, []Entry{deleted}))
	require.NoError(t, err)
	require.Len(t, contents.Entries, 2)
	epoch, ok := DeletedEpoch(contents.Entries[1].Data)
	require.True(t, ok)
	require.Equal(t, uint64(7), epoch)
	_, ok = DeletedEpoch(contents.Entries[0].Data)
	require.False(t, ok, "a record is no tombstone")
	_, ok = DeletedEpoch(nil)
	require.False(t, ok)
}

// FuzzReadSegment feeds arbitrary bytes to the log's decoder, as Open
// would find them beside a database. It must return entries, a torn
// tail or an error matching ErrCorrupt, never panic; what it returns
// must encode back to a prefix of the input.
func FuzzReadSegment(f *testing.F) {
	good := segmentOf([]Entry{entryOf(f, 1, "ex-1"), entryOf(f, 2, "ex-2")}, []Entry{entryOf(f, 3, "ex-1")})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(segmentOf([]Entry{entryOf(f, 1, "ex-1")}, []Entry{{Revision: 2, Namespace: "executions", ID: "ex-1", Data: Tombstone(1 << 40)}}))
	f.Add([]byte(Magic))
	f.Add([]byte(Magic[:5]))
	f.Add(append([]byte(Magic), make([]byte, 40)...))
	f.Add([]byte("not a log at all, but long enough to look like one"))
	zeroedHeader := append([]byte(nil), good...)
	clear(zeroedHeader[len(Magic) : len(Magic)+FrameHeaderSize]) // whole frames follow: damage
	f.Add(zeroedHeader)
	tornHead := append([]byte(nil), good...)
	first := len(Magic) + FrameHeaderSize + int(binary.LittleEndian.Uint32(good[len(Magic):]))
	clear(tornHead[first : first+FrameHeaderSize]) // the last frame's header: a torn tail
	f.Add(tornHead)
	f.Fuzz(func(t *testing.T, data []byte) {
		contents, err := ReadSegment(data)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if len(contents.Entries) == 0 {
			return
		}
		// Re-encode, one entry a frame: the entries themselves must be
		// what the input held, so each must encode to bytes of it.
		for _, e := range contents.Entries {
			enc := AppendEntry(nil, e.Revision, e.Namespace, e.ID, e.Data)
			if !bytes.Contains(data, enc) {
				t.Fatalf("entry at revision %d is not in the input", e.Revision)
			}
		}
	})
}

// Scan judges a log as Open trusts it: the first fault is where the log
// stops being good, whatever comes after it, and a gap in revisions
// counts only beyond the file's counter.
func TestScanFindsTheFirstFaultOfALog(t *testing.T) {
	seg := func(revisions ...uint64) SegmentData {
		var batch []Entry
		for _, r := range revisions {
			batch = append(batch, entryOf(t, r, "ex-1"))
		}
		return SegmentData{SegmentFile: SegmentFile{Path: "db.wal-x"}, Data: segmentOf(batch)}
	}
	// damaged is a segment of the revisions given, then a frame failing
	// its checksum with a whole one after it: damage, not a torn tail.
	damaged := func(revisions ...uint64) SegmentData {
		sd := seg(revisions...)
		next := revisions[len(revisions)-1] + 10
		bad := segmentOf([]Entry{entryOf(t, next, "ex-2")})[len(Magic):]
		bad[FrameHeaderSize] ^= 0xff
		sd.Data = append(append(sd.Data, bad...), segmentOf([]Entry{entryOf(t, next+1, "ex-2")})[len(Magic):]...)
		return sd
	}
	torn := func(sd SegmentData) SegmentData {
		return SegmentData{SegmentFile: sd.SegmentFile, Data: sd.Data[:len(sd.Data)-3]}
	}
	for name, tc := range map[string]struct {
		segs        []SegmentData
		counter     uint64
		kept        int
		faults      []string
		missingFrom uint64
		missingTo   uint64
	}{
		"a whole log":                                  {segs: []SegmentData{seg(1, 2), seg(3)}, kept: 3},
		"a torn tail of the last segment":              {segs: []SegmentData{seg(1, 2), torn(seg(3))}, kept: 2},
		"a gap beyond the counter":                     {segs: []SegmentData{seg(1, 2), seg(5)}, kept: 2, faults: []string{"misses revisions 3 to 4"}, missingFrom: 3, missingTo: 4},
		"a gap below the counter":                      {segs: []SegmentData{seg(1, 2), seg(5)}, counter: 4, kept: 3},
		"a gap across the counter":                     {segs: []SegmentData{seg(1), seg(5)}, counter: 2, kept: 1, faults: []string{"misses revisions 3 to 4"}, missingFrom: 3, missingTo: 4},
		"revisions going back":                         {segs: []SegmentData{seg(1, 2), seg(2)}, kept: 2, faults: []string{"revision 2 follows revision 2"}},
		"a torn segment before another":                {segs: []SegmentData{torn(seg(1, 2)), seg(3)}, kept: 0, faults: []string{"a later segment follows it"}},
		"damage after the first fault counted":         {segs: []SegmentData{seg(1), seg(4), damaged(9)}, kept: 1, faults: []string{"misses revisions 2 to 3", "checksum"}, missingFrom: 2, missingTo: 3},
		"an order fault before a segment's own damage": {segs: []SegmentData{seg(2), damaged(1)}, counter: 1, kept: 1, faults: []string{"revision 1 follows revision 2", "checksum"}},
	} {
		t.Run(name, func(t *testing.T) {
			entries, faults := Scan(tc.segs, tc.counter)
			require.Len(t, entries, tc.kept)
			require.Len(t, faults, len(tc.faults))
			for k, want := range tc.faults {
				require.ErrorIs(t, faults[k].Err, storage.ErrCorrupt)
				require.ErrorContains(t, faults[k].Err, want)
				require.ErrorContains(t, faults[k].Err, "db.wal-x")
			}
			if len(faults) > 0 {
				require.Equal(t, tc.missingFrom, faults[0].MissingFrom)
				require.Equal(t, tc.missingTo, faults[0].MissingTo)
			}
		})
	}
}

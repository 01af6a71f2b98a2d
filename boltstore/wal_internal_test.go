package boltstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// segmentOf builds a segment holding one frame per batch.
func segmentOf(batches ...[]walEntry) []byte {
	out := []byte(walMagic)
	for _, batch := range batches {
		frame := make([]byte, frameHeaderSize)
		for _, e := range batch {
			frame = appendEntry(frame, e.revision, e.namespace, e.id, e.data)
		}
		sealFrame(frame)
		out = append(out, frame...)
	}
	return out
}

func entryOf(t testing.TB, revision uint64, id string) walEntry {
	data, err := storage.Record{ID: id, Status: "running", Revision: revision}.MarshalBinary()
	require.NoError(t, err)
	return walEntry{revision: revision, namespace: "executions", id: id, data: data}
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
		"an empty frame before another":   {segmentOf([]walEntry{}, []walEntry{good}), "empty"},
		"a record naming another id":      {segmentOf([]walEntry{{revision: 2, namespace: "executions", id: "ex-1", data: otherRecord.data}}), "says it is"},
		"a record at another revision":    {segmentOf([]walEntry{{revision: 7, namespace: "executions", id: "ex-2", data: otherRecord.data}}), "at revision 2"},
		"a record that does not decode":   {segmentOf([]walEntry{{revision: 1, namespace: "executions", id: "ex-1", data: []byte{9, '{'}}}), "record \"ex-1\""},
		"a namespace that is not UTF-8":   {segmentOf([]walEntry{{revision: 1, namespace: "exec\xff", id: "ex-1", data: good.data}}), "UTF-8"},
		"an empty id":                     {segmentOf([]walEntry{{revision: 1, namespace: "executions", id: "", data: good.data}}), "revision 1"},
		"revision zero":                   {segmentOf([]walEntry{{revision: 0, namespace: "executions", id: "ex-1", data: good.data}}), "without a revision"},
		"a bad frame before a good frame": {append(bytes.Replace(segmentOf([]walEntry{good}), []byte("running"), []byte("runnin!"), 1), segmentOf([]walEntry{otherRecord})[len(walMagic):]...), "checksum"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readSegment(tc.segment)
			require.ErrorIs(t, err, storage.ErrCorrupt)
			require.ErrorContains(t, err, tc.want)
		})
	}
	contents, err := readSegment(segmentOf([]walEntry{good, otherRecord}))
	require.NoError(t, err)
	require.False(t, contents.torn)
	require.Equal(t, []walEntry{good, otherRecord}, contents.entries)
}

// FuzzReadSegment feeds arbitrary bytes to the log's decoder, as Open
// would find them beside a database. It must return entries, a torn
// tail or an error matching ErrCorrupt, never panic; what it returns
// must encode back to a prefix of the input.
func FuzzReadSegment(f *testing.F) {
	good := segmentOf([]walEntry{entryOf(f, 1, "ex-1"), entryOf(f, 2, "ex-2")}, []walEntry{entryOf(f, 3, "ex-1")})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte(walMagic))
	f.Add([]byte(walMagic[:5]))
	f.Add(append([]byte(walMagic), make([]byte, 40)...))
	f.Add([]byte("not a log at all, but long enough to look like one"))
	f.Fuzz(func(t *testing.T, data []byte) {
		contents, err := readSegment(data)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if len(contents.entries) == 0 {
			return
		}
		// Re-encode, one entry a frame: the entries themselves must be
		// what the input held, so each must encode to bytes of it.
		for _, e := range contents.entries {
			enc := appendEntry(nil, e.revision, e.namespace, e.id, e.data)
			if !bytes.Contains(data, enc) {
				t.Fatalf("entry at revision %d is not in the input", e.revision)
			}
		}
	})
}

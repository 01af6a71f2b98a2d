package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/internal/testwait"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

func TestMemoryConformance(t *testing.T) {
	storagetest.Run(t, func(*testing.T) storage.Store { return storage.NewMemory() })
	storagetest.RunTable(t, func(*testing.T) storage.Store { return storage.NewMemory() })
}

func TestZeroMemoryIsReady(t *testing.T) {
	var s storage.Memory
	_, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
}

func TestRecordEncodingRoundTrips(t *testing.T) {
	rec := storagetest.Sample("ex-1")
	rec.Revision = 42
	data, err := rec.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(1), data[0], "format byte")
	var back storage.Record
	require.NoError(t, back.UnmarshalBinary(data))
	require.Equal(t, rec.Revision, back.Revision)
	require.True(t, rec.UpdatedAt.Equal(back.UpdatedAt))
	require.True(t, rec.Since.Equal(back.Since))
	back.UpdatedAt, back.Since = rec.UpdatedAt, rec.Since
	entries, backEntries := rec.History.Entries(), back.History.Entries()
	require.Len(t, backEntries, len(entries))
	for k := range backEntries {
		require.True(t, entries[k].At.Equal(backEntries[k].At))
		backEntries[k].At = entries[k].At
	}
	back.History, err = storage.NewTrail(backEntries...)
	require.NoError(t, err)
	require.Equal(t, rec, back)
}

func TestRecordEncodingRefusesInvalidRecords(t *testing.T) {
	rec := storagetest.Sample("")
	_, err := rec.MarshalBinary()
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
}

// AppendBinary is MarshalBinary after whatever the buffer holds, through
// the fast encoder and through encoding/json alike, and leaves the buffer
// as it was when it refuses the record.
func TestRecordAppendBinaryIsMarshalBinaryAfterTheBuffer(t *testing.T) {
	plain := storagetest.Sample("ex-1")
	// encoding/json escapes <, > and quotes: in the record's own texts,
	// and in its trail's alone.
	escaped := storagetest.Sample("ex-<2>")
	escaped.Reason = "a \"quoted\" reason"
	inTrail := storagetest.Sample("ex-3")
	var err error
	inTrail.History, err = inTrail.History.Append(storage.Entry{From: "running", To: "paused", Reason: "x < y",
		At: inTrail.UpdatedAt, Revision: 1}, storage.DefaultHistoryLimit)
	require.NoError(t, err)
	for _, rec := range []storage.Record{plain, escaped, inTrail} {
		want, err := rec.MarshalBinary()
		require.NoError(t, err)
		for _, prefix := range [][]byte{nil, []byte("key="), append(make([]byte, 0, 8192), "roomy"...)} {
			got, err := rec.AppendBinary(bytes.Clone(prefix))
			require.NoError(t, err)
			require.Equal(t, string(prefix)+string(want), string(got))
		}
	}
	got, err := storagetest.Sample("").AppendBinary([]byte("kept"))
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	require.Equal(t, "kept", string(got))
}

func TestRecordDecodingRefusesCorruptOrForeignBytes(t *testing.T) {
	good, err := storagetest.Sample("ex-1").MarshalBinary()
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"empty":           nil,
		"future format":   append([]byte{2}, good[1:]...),
		"format zero":     append([]byte{0}, good[1:]...),
		"truncated":       good[:len(good)/2],
		"garbage":         []byte("\x01\x00\xff\xfe"),
		"trailing data":   append(append([]byte(nil), good...), []byte(` {"id":"x"}`)...),
		"unknown field":   []byte(`` + "\x01" + `{"id":"ex-1","status":"running","revision":1,"epoch":0,"updated_at":"2026-01-01T00:00:00Z","color":"red"}`),
		"invalid record":  []byte("\x01" + `{"id":"","status":"running","revision":1,"epoch":0,"updated_at":"2026-01-01T00:00:00Z"}`),
		"invalid UTF-8":   []byte("\x01" + `{"id":"ex-` + "\xff" + `","status":"running","revision":1,"epoch":0,"updated_at":"2026-01-01T00:00:00Z"}`),
		"wrong types":     []byte("\x01" + `{"id":1}`),
		"JSON null":       []byte("\x01null"),
		"negative epoch":  []byte("\x01" + `{"id":"ex-1","status":"running","revision":1,"epoch":-1,"updated_at":"2026-01-01T00:00:00Z"}`),
		"overflowing rev": []byte("\x01" + `{"id":"ex-1","status":"running","revision":18446744073709551616,"epoch":0,"updated_at":"2026-01-01T00:00:00Z"}`),
		"trail out of order": []byte("\x01" + `{"id":"ex-1","status":"running","revision":9,"epoch":0,"updated_at":"2026-01-01T00:00:00Z",` +
			`"history":[{"from":"a","to":"b","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5},{"from":"b","to":"c","epoch":0,"at":"2026-01-01T00:00:00Z","revision":3}]}`),
		"unknown entry field": []byte("\x01" + `{"id":"ex-1","status":"running","revision":9,"epoch":0,"updated_at":"2026-01-01T00:00:00Z",` +
			`"history":[{"from":"a","to":"b","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5,"color":"red"}]}`),
		"invalid entry": []byte("\x01" + `{"id":"ex-1","status":"running","revision":9,"epoch":0,"updated_at":"2026-01-01T00:00:00Z",` +
			`"history":[{"from":"` + strings.Repeat("a", storage.MaxStatusLen+1) + `","to":"b","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5}]}`),
	} {
		rec := storagetest.Sample("untouched")
		err := rec.UnmarshalBinary(data)
		require.ErrorIs(t, err, storage.ErrCorrupt, name)
		require.Equal(t, "untouched", rec.ID, "%s: a failed decode leaves the record alone", name)
	}
}

func FuzzRecordUnmarshalBinary(f *testing.F) {
	good, _ := storagetest.Sample("ex-1").MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte("\x01{}"))
	f.Add([]byte("\x02{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec storage.Record
		if err := rec.UnmarshalBinary(data); err != nil {
			require.ErrorIs(t, err, storage.ErrCorrupt)
			return
		}
		// Whatever decodes is valid and survives another round trip.
		require.NoError(t, rec.Validate())
		again, err := rec.MarshalBinary()
		require.NoError(t, err)
		var back storage.Record
		require.NoError(t, back.UnmarshalBinary(again))
		require.Equal(t, rec.ID, back.ID)
		require.Equal(t, rec.Status, back.Status)
		require.Equal(t, rec.Revision, back.Revision)
		require.Equal(t, rec.History.Len(), back.History.Len())
	})
}

// A record's JSON document is what MarshalBinary writes after its format
// byte, and reads back indented too: the kube store keeps it so, for
// people reading ConfigMaps.
func TestRecordJSONIsTheBinaryFormsDocument(t *testing.T) {
	rec := storagetest.Sample("ex-1")
	binary, err := rec.MarshalBinary()
	require.NoError(t, err)
	text, err := rec.EncodeJSON()
	require.NoError(t, err)
	require.Equal(t, binary[1:], text)
	var indented bytes.Buffer
	require.NoError(t, json.Indent(&indented, text, "", "  "))
	for _, doc := range [][]byte{text, indented.Bytes()} {
		var back storage.Record
		require.NoError(t, back.DecodeJSON(doc))
		require.Equal(t, rec.ID, back.ID)
		require.Equal(t, rec.History, back.History)
		require.Equal(t, rec.Meta, back.Meta)
	}
	for name, doc := range map[string]string{
		"empty": "", "null": "null", "unknown field": `{"id":"ex-1","color":"red"}`,
		"invalid UTF-8": "{\"id\":\"\xff\"}", "trailing": string(text) + " {}",
	} {
		back := storagetest.Sample("untouched")
		require.ErrorIs(t, back.DecodeJSON([]byte(doc)), storage.ErrCorrupt, name)
		require.Equal(t, "untouched", back.ID, name)
	}
	invalid := rec
	invalid.ID = ""
	_, err = invalid.EncodeJSON()
	require.ErrorIs(t, err, storage.ErrInvalidRecord, "what is encoded is valid")
}

func FuzzRecordDecodeJSON(f *testing.F) {
	good, _ := storagetest.Sample("ex-1").EncodeJSON()
	var indented bytes.Buffer
	_ = json.Indent(&indented, good, "", "  ")
	f.Add(good)
	f.Add(indented.Bytes())
	f.Add([]byte("{}"))
	f.Add([]byte(`{"id":"ex-1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec storage.Record
		if err := rec.DecodeJSON(data); err != nil {
			require.ErrorIs(t, err, storage.ErrCorrupt)
			return
		}
		require.NoError(t, rec.Validate())
		again, err := rec.EncodeJSON()
		require.NoError(t, err)
		var back storage.Record
		require.NoError(t, back.DecodeJSON(again))
		require.Equal(t, rec.ID, back.ID)
		require.Equal(t, rec.Revision, back.Revision)
		require.Equal(t, rec.History, back.History)
	})
}

// A watch from a revision the log no longer holds starts with every record
// at its current revision, then follows new writes: nothing is missed.
func TestMemoryWatchFromACompactedRevisionDeliversEveryRecord(t *testing.T) {
	s := &storage.Memory{LogSize: 4}
	var last storage.Record
	for k := range 20 {
		rec, err := s.Create(bg, storagetest.Sample(fmt.Sprintf("ex-%02d", k)))
		require.NoError(t, err)
		last = rec
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ch, err := s.Watch(ctx, 1)
	require.NoError(t, err)
	seen := map[string]uint64{}
	for range 20 {
		ev := testwait.Recv(t, ch, "a snapshot event")
		seen[ev.ID] = ev.Revision
	}
	require.Len(t, seen, 20)
	require.Equal(t, last.Revision, seen["ex-19"])
	next := last
	next.Reason = "after the snapshot"
	written, err := s.CompareAndSwap(bg, last.ID, last.Revision, next)
	require.NoError(t, err)
	require.Equal(t, storage.WatchEvent{ID: "ex-19", Revision: written.Revision}, testwait.Recv(t, ch, "the write after the snapshot"))

	// A watch from a retained revision replays only the log.
	ch2, err := s.Watch(ctx, written.Revision-3)
	require.NoError(t, err)
	require.Equal(t, "ex-18", testwait.Recv(t, ch2, "the replay of ex-18").ID)
	require.Equal(t, "ex-19", testwait.Recv(t, ch2, "the replay of ex-19").ID)
}

// However often the log has been trimmed, a watch from any revision
// misses no write after it: the log replays every one, or the watch
// starts from every record.
func TestMemoryWatchFromAnyRevisionMissesNothingAfterTrims(t *testing.T) {
	s := &storage.Memory{LogSize: 4}
	const writes = 30 // the log is trimmed at every 2×LogSize writes
	for k := range writes {
		_, err := s.Create(bg, storagetest.Sample(fmt.Sprintf("ex-%02d", k)))
		require.NoError(t, err)
	}
	for from := uint64(0); from < writes; from++ {
		ctx, cancel := context.WithCancel(bg)
		ch, err := s.Watch(ctx, from)
		require.NoError(t, err)
		seen := map[string]uint64{}
		for len(seen) == 0 || seen[fmt.Sprintf("ex-%02d", writes-1)] == 0 {
			ev := testwait.Recv(t, ch, fmt.Sprintf("an event of the watch from %d", from))
			seen[ev.ID] = ev.Revision
		}
		cancel()
		for k := range writes {
			if rev := uint64(k + 1); rev > from {
				require.Equal(t, rev, seen[fmt.Sprintf("ex-%02d", k)], "the watch from %d missed the write at %d", from, rev)
			}
		}
	}
}

func TestCheckContextRefusesNilAndDoneContexts(t *testing.T) {
	//lint:ignore SA1012 the point is that a nil context is an error, not a panic
	err := storage.CheckContext(nil, "mystore", "Get") //nolint:staticcheck
	require.ErrorContains(t, err, "mystore: Get: nil context.Context")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	require.ErrorIs(t, storage.CheckContext(ctx, "mystore", "Get"), context.Canceled)
	require.NoError(t, storage.CheckContext(bg, "mystore", "Get"))
}

// An id is named in URLs, log lines and terminals: one with a control
// character (a newline that forges a log line, an escape sequence) is
// refused everywhere, by id checks and by record validation alike.
func TestAnIDWithAControlCharacterIsRefused(t *testing.T) {
	for _, id := range []string{"a\x00b", "a\nb", "a\x1b[2Jb", "a\x7fb", "a\u0085b", "\u009b31m"} {
		err := storage.ValidateID(id)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, "%q", id)
		require.ErrorContains(t, err, "control character", "%q", id)
		rec := storagetest.Sample(id)
		require.ErrorIs(t, rec.Validate(), storage.ErrInvalidRecord, "%q", id)
		_, err = storage.NewMemory().Create(context.Background(), rec)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, "%q", id)
	}
	for _, id := range []string{"ex-1", "é/ü 42", "job_\u00a0x", strings.Repeat("x", storage.MaxIDLen)} {
		require.NoError(t, storage.ValidateID(id), "%q", id)
		rec := storagetest.Sample(id)
		require.NoError(t, rec.Validate(), "%q", id)
	}
	require.ErrorContains(t, storage.ValidateID("a\xffb"), "not valid UTF-8")
}

// The revision each audit entry wrote is the one the write returned,
// with two records' writes interleaved on one store (revisions are the
// store's, not the record's) and the oldest entries cut by the trail's
// limit.
func TestWrittenIsTheRevisionEachChangeWrote(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory()
	table, err := transition.New("queued").Allow("queued", "running").Allow("running", "done").Terminal("done").Build()
	require.NoError(t, err)
	a, err := transition.NewPersisted(table, store, "a", transition.PersistedOptions{Actor: "a", History: 4})
	require.NoError(t, err)
	b, err := transition.NewPersisted(table, store, "b", transition.PersistedOptions{Actor: "b"})
	require.NoError(t, err)
	created, err := a.Create(ctx, transition.To("queued"))
	require.NoError(t, err)
	wrote := []uint64{created.Revision}
	_, err = b.Create(ctx, transition.To("queued"))
	require.NoError(t, err)
	for k := range 5 {
		c, _, err := a.Apply(ctx, func(string, storage.Record) (transition.Update[string], error) {
			return transition.To("queued").Set("progress", fmt.Sprint(k)).Because("progress"), nil
		})
		require.NoError(t, err)
		wrote = append(wrote, c.Revision)
		_, err = b.Fire(ctx, "running", "")
		require.NoError(t, err)
	}
	c, err := a.Fire(ctx, "running", "started")
	require.NoError(t, err)
	wrote = append(wrote, c.Revision)
	rec, err := store.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, wrote[len(wrote)-4:], rec.Written(), "the last four, as the trail keeps")
	require.Nil(t, storage.Record{ID: "x", Status: "queued"}.Written())
}

package archive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/archive"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

func retired(id, reason string) storage.Retired {
	rec := storagetest.Sample(id)
	rec.Revision = 42
	return storage.Retired{Record: rec, Reason: reason, At: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
}

func readAll(t *testing.T, path string) []storage.Retired {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []storage.Retired
	rd := archive.NewReader(f)
	for {
		r, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, r)
	}
}

// What Keep took reads back as it was given, trail and revision
// included, across Keeps and across a reopen.
func TestKeptRecordsReadBackAsTheyWere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	a, err := archive.Open(path)
	require.NoError(t, err)
	first := []storage.Retired{retired("ex-1", "completed, kept 24h0m0s"), retired("ex-2", "failed, kept 720h0m0s")}
	require.NoError(t, a.Keep(bg, first))
	require.NoError(t, a.Close())
	a, err = archive.Open(path)
	require.NoError(t, err)
	defer a.Close()
	third := retired("ex-3", "removed by hand: a duplicate submission")
	require.NoError(t, a.Keep(bg, []storage.Retired{third}))

	got := readAll(t, path)
	require.Len(t, got, 3)
	for k, want := range append(first, third) {
		require.Equal(t, want.Reason, got[k].Reason)
		require.True(t, want.At.Equal(got[k].At))
		require.Equal(t, storagetest.Encoded(t, want.Record), storagetest.Encoded(t, got[k].Record), "record %d", k)
		require.Equal(t, want.Record.History.Len(), got[k].Record.History.Len(), "the audit trail came along")
	}
}

// A crash while a line was written leaves it cut short; it was never
// acknowledged, and Open cuts it off, so the lines after it are whole.
func TestOpenCutsOffALineCutShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	a, err := archive.Open(path)
	require.NoError(t, err)
	require.NoError(t, a.Keep(bg, []storage.Retired{retired("ex-1", "kept")}))
	require.NoError(t, a.Close())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"at":"2026-12-07T12:00:00Z","reason":"torn","rec`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	a, err = archive.Open(path)
	require.NoError(t, err)
	require.NoError(t, a.Keep(bg, []storage.Retired{retired("ex-2", "after the crash")}))
	require.NoError(t, a.Close())
	got := readAll(t, path)
	require.Len(t, got, 2)
	require.Equal(t, "ex-1", got[0].Record.ID)
	require.Equal(t, "ex-2", got[1].Record.ID)
}

// A record that does not encode fails Keep before a byte is written;
// a done context and a closed file write nothing either.
func TestKeepWritesAllOrNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	a, err := archive.Open(path)
	require.NoError(t, err)
	bad := retired("ex-bad", "kept")
	bad.Record.Status = ""
	err = a.Keep(bg, []storage.Retired{retired("ex-1", "kept"), bad})
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	done, cancel := context.WithCancel(bg)
	cancel()
	require.ErrorIs(t, a.Keep(done, []storage.Retired{retired("ex-1", "kept")}), context.Canceled)
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Keep(bg, []storage.Retired{retired("ex-1", "kept")}), archive.ErrClosed)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, info.Size())
}

// A line that is not a retired record is named by its number, and the
// lines after it still read.
func TestAMalformedLineIsNamedAndTheRestRead(t *testing.T) {
	var buf bytes.Buffer
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	a, err := archive.Open(path)
	require.NoError(t, err)
	require.NoError(t, a.Keep(bg, []storage.Retired{retired("ex-1", "kept")}))
	require.NoError(t, a.Close())
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	buf.Write(good)
	buf.WriteString(`{"at":"2026-12-07T12:00:00Z","reason":"x","record":{"id":"ex-2"}}` + "\n")
	buf.WriteString(`{"at":"2026-12-07T12:00:00Z","reason":"x","record":{},"extra":1}` + "\n")
	buf.WriteString(strings.Repeat("x", archive.MaxLineBytes+10) + "\n")
	buf.Write(good)
	rd := archive.NewReader(&buf)
	r, err := rd.Next()
	require.NoError(t, err)
	require.Equal(t, "ex-1", r.Record.ID)
	_, err = rd.Next()
	require.ErrorIs(t, err, archive.ErrMalformed)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "line 2")
	_, err = rd.Next()
	require.ErrorIs(t, err, archive.ErrMalformed)
	require.ErrorContains(t, err, "line 3")
	_, err = rd.Next()
	require.ErrorIs(t, err, archive.ErrMalformed)
	require.ErrorContains(t, err, "line 4: longer than")
	r, err = rd.Next()
	require.NoError(t, err)
	require.Equal(t, "ex-1", r.Record.ID)
	_, err = rd.Next()
	require.ErrorIs(t, err, io.EOF)
}

// FuzzReader feeds arbitrary bytes to the archive's reader, as a file
// found on disk: every line is a record, an error matching ErrMalformed,
// or the end; never a panic, and never more lines than the input has.
func FuzzReader(f *testing.F) {
	path := filepath.Join(f.TempDir(), "retired.jsonl")
	a, err := archive.Open(path)
	require.NoError(f, err)
	require.NoError(f, a.Keep(bg, []storage.Retired{retired("ex-1", "kept"), retired("ex-2", "failed, kept 720h0m0s")}))
	require.NoError(f, a.Close())
	good, err := os.ReadFile(path)
	require.NoError(f, err)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"at":"2026-12-07T12:00:00Z","reason":"x","record":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := archive.NewReader(bytes.NewReader(data))
		lines := bytes.Count(data, []byte("\n")) + 1
		for k := 0; ; k++ {
			if k > lines {
				t.Fatalf("read %d lines from input of %d", k, lines)
			}
			r, err := rd.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if !errors.Is(err, archive.ErrMalformed) {
					t.Fatalf("error %v does not match ErrMalformed", err)
				}
				continue
			}
			if err := r.Record.Validate(); err != nil {
				t.Fatalf("a record read back does not validate: %v", err)
			}
		}
	})
}

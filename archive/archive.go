// Package archive keeps retired records ([storage.Retired]) in a JSON
// Lines file: one retired record a line, appended and flushed to disk
// before [File.Keep] returns, so a record a retirer deletes after Keep is
// on the disk first. It is the [storage.Archive] a fleet gets without
// writing one of its own; read one back with [Reader], or with any tool
// that reads JSON Lines (jq -c 'select(.record.status == "failed")').
//
// Each line is an object:
//
//	{"at":"2026-12-07T12:00:00Z","reason":"failed, kept 720h0m0s","record":{...}}
//
// where record is the record as [storage.Record.EncodeJSON] writes it,
// its audit trail included.
package archive

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// MaxLineBytes bounds a line: the largest record a store keeps (a full
// trail of long reasons, full metadata) fits with room to spare, and a
// reader never buffers more than this for one line.
const MaxLineBytes = 8 << 20

// ErrClosed is matched by the error of Keep on a closed File.
var ErrClosed = errors.New("archive: file is closed")

// File is an archive in one JSON Lines file, appended to. It is safe for
// concurrent use; several processes must not append to one file.
type File struct {
	path string
	mu   sync.Mutex
	f    *os.File
	line []byte // Keep's buffer
}

var _ storage.Archive = (*File)(nil)

// Open opens the archive at path for appending, creating it (mode 0600)
// if needed. A last line cut short (a crash while it was written, never
// acknowledged by Keep) is cut off, so the next line starts on a line of
// its own.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if err := dropTornTail(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("archive: %s: %w", path, err)
	}
	return &File{path: path, f: f}, nil
}

// dropTornTail cuts f after its last newline and leaves its offset at
// the end.
func dropTornTail(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	end := size
	buf := make([]byte, 64<<10)
	for end > 0 {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = end - n + int64(i) + 1
			break
		}
		end -= n
	}
	if end != size {
		if err := f.Truncate(end); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	_, err = f.Seek(end, io.SeekStart)
	return err
}

// Path returns the file's path.
func (a *File) Path() string { return a.path }

// line is one line of the file.
type line struct {
	At     time.Time       `json:"at"`
	Reason string          `json:"reason"`
	Record json.RawMessage `json:"record"`
}

// Keep implements [storage.Archive]: the records are encoded, written
// with one write and flushed (fsync) before it returns. A record that
// does not encode (it breaks a limit of storage.Record) fails the call
// before anything is written.
func (a *File) Keep(ctx context.Context, retired []storage.Retired) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return ErrClosed
	}
	buf := a.line[:0]
	for _, r := range retired {
		var err error
		if buf, err = appendLine(buf, r); err != nil {
			return err
		}
	}
	if _, err := a.f.Write(buf); err != nil {
		return fmt.Errorf("archive: %s: %w", a.path, err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("archive: %s: %w", a.path, err)
	}
	if cap(buf) <= 1<<20 {
		a.line = buf[:0]
	}
	return nil
}

// Write writes retired to w as lines of the archive's format: what Keep
// writes to its file, for a caller that writes elsewhere (an export to a
// pipe). A record that does not encode fails it before anything is
// written.
func Write(w io.Writer, retired []storage.Retired) error {
	var buf []byte
	for _, r := range retired {
		var err error
		if buf, err = appendLine(buf, r); err != nil {
			return err
		}
	}
	_, err := w.Write(buf)
	return err
}

// appendLine appends r's line to buf.
func appendLine(buf []byte, r storage.Retired) ([]byte, error) {
	rec, err := r.Record.EncodeJSON()
	if err != nil {
		return buf, fmt.Errorf("archive: record %q: %w", r.Record.ID, err)
	}
	data, err := json.Marshal(line{At: r.At.UTC(), Reason: r.Reason, Record: rec})
	if err != nil {
		return buf, fmt.Errorf("archive: record %q: %w", r.Record.ID, err)
	}
	if len(data)+1 > MaxLineBytes {
		return buf, fmt.Errorf("archive: record %q: %w: %d bytes, over a line's %d", r.Record.ID, storage.ErrInvalidRecord, len(data)+1, MaxLineBytes)
	}
	return append(append(buf, data...), '\n'), nil
}

// Close closes the file; Keep after it fails with ErrClosed.
func (a *File) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// Reader reads an archive's lines back, in order.
type Reader struct {
	r    *bufio.Reader
	line int
}

// NewReader returns a Reader of the JSON Lines in r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ErrMalformed is matched by the error of a line that is not a retired
// record as Keep writes it; the error names the line.
var ErrMalformed = errors.New("archive: malformed line")

// Next returns the next retired record, or io.EOF after the last. A line
// that does not decode is an error matching ErrMalformed (and, for a
// record that does not, storage.ErrCorrupt) naming its line number; the
// lines after it can still be read. A last line without its newline is
// read like any other.
func (rd *Reader) Next() (storage.Retired, error) {
	data, err := rd.readLine()
	if err != nil {
		return storage.Retired{}, err
	}
	var l line
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return storage.Retired{}, fmt.Errorf("%w %d: %v", ErrMalformed, rd.line, err)
	}
	if dec.More() {
		return storage.Retired{}, fmt.Errorf("%w %d: more than one object", ErrMalformed, rd.line)
	}
	if len(l.Record) == 0 || string(l.Record) == "null" {
		return storage.Retired{}, fmt.Errorf("%w %d: no record", ErrMalformed, rd.line)
	}
	var rec storage.Record
	if err := rec.DecodeJSON(l.Record); err != nil {
		return storage.Retired{}, fmt.Errorf("%w %d: %w", ErrMalformed, rd.line, err)
	}
	return storage.Retired{Record: rec, Reason: l.Reason, At: l.At}, nil
}

// readLine returns the next line without its newline, skipping none: a
// line longer than MaxLineBytes is an error (the rest of it is skipped,
// so the next call reads the line after it).
func (rd *Reader) readLine() ([]byte, error) {
	var data []byte
	long := false
	for {
		chunk, err := rd.r.ReadSlice('\n')
		if !long {
			if len(data)+len(chunk) > MaxLineBytes+1 {
				long, data = true, nil
			} else {
				data = append(data, chunk...)
			}
		}
		switch {
		case err == nil:
			rd.line++
			if long {
				return nil, fmt.Errorf("%w %d: longer than %d bytes", ErrMalformed, rd.line, MaxLineBytes)
			}
			return data[:len(data)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(data) > 0 || long):
			rd.line++
			if long {
				return nil, fmt.Errorf("%w %d: longer than %d bytes", ErrMalformed, rd.line, MaxLineBytes)
			}
			return data, nil
		default:
			return nil, err
		}
	}
}

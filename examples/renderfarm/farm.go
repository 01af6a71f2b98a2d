package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
)

// Status is where a render job is in its life.
type Status string

// The render job's statuses. moving is this table's relocating state: the
// controller was told to leave its machine and the next one resumes the
// job where it was.
const (
	StatusQueued     Status = "queued"
	StatusRendering  Status = "rendering"
	StatusPaused     Status = "paused"
	StatusMoving     Status = "moving"
	StatusCancelling Status = "cancelling"
	StatusDone       Status = "done"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
)

// Farm is where the farm keeps its files: the spool directory users drop
// jobs into (one "<id>.job" file holding the frame count), the rendered
// frames, and the controller's database.
type Farm struct{ Dir string }

func (f Farm) spool() string           { return filepath.Join(f.Dir, "spool") }
func (f Farm) frames(id string) string { return filepath.Join(f.Dir, "out", id) }
func (f Farm) dbPath() string          { return filepath.Join(f.Dir, "farm.db") }

// Submit drops a job into the spool.
func (f Farm) Submit(id string, frames int) error {
	if err := os.MkdirAll(f.spool(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(f.spool(), id+".job"), []byte(strconv.Itoa(frames)), 0o644)
}

// Withdraw takes a job out of the spool: its user cancelled it.
func (f Farm) Withdraw(id string) error {
	return os.Remove(filepath.Join(f.spool(), id+".job"))
}

// Jobs lists the spool: every job's id and frame count.
func (f Farm) Jobs() (map[string]int, error) {
	entries, err := os.ReadDir(f.spool())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	jobs := make(map[string]int, len(entries))
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".job")
		if !ok {
			continue
		}
		text, err := os.ReadFile(filepath.Join(f.spool(), e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // withdrawn while we listed
		} else if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(text)))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("spool file %s: want a frame count, got %q", e.Name(), text)
		}
		jobs[id] = n
	}
	return jobs, nil
}

// Job is a job of the spool: its frame count, and whether it is there.
func (f Farm) Job(id string) (frames int, spooled bool, err error) {
	jobs, err := f.Jobs()
	frames, spooled = jobs[id]
	return frames, spooled, err
}

// Rendered counts a job's rendered frames: the world's word, not the
// record's, so a frame rendered just before a crash is never rendered
// twice.
func (f Farm) Rendered(id string) (int, error) {
	entries, err := os.ReadDir(f.frames(id))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return len(entries), err
}

// RenderFrame renders frame n of a job: it writes the frame's file, all
// of it or none of it.
func (f Farm) RenderFrame(id string, n int) error {
	dir := f.frames(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(f.Dir, "frame-*")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(tmp, "P1\n1 1\n%d\n", n%2)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, fmt.Sprintf("frame-%04d.pbm", n)))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// errFramesMissing is the done guard's veto.
var errFramesMissing = errors.New("frames missing")

// Lifecycle is the render job's lifecycle: its roles, which write the
// moves the recovery decisions need; the table adds a pause and its
// resume, and a guard: a job is done only when every frame is on disk.
func (f Farm) Lifecycle() (*recovery.Roles[Status], error) {
	table := transition.New(StatusQueued).Allow(StatusRendering, StatusPaused).Allow(StatusPaused, StatusRendering)
	for _, from := range []Status{StatusRendering, StatusPaused, StatusCancelling} {
		table.Guard(from, StatusDone, f.allRendered)
	}
	return recovery.DefineLifecycle(table).NotStarted(StatusQueued).Running(StatusRendering, StatusPaused).
		Relocating(StatusMoving, StatusQueued).Stopping(StatusCancelling, StatusCancelled).
		Failed(StatusFailed).Ends(StatusDone, StatusCancelled).Build()
}

// allRendered is the guard of every move to done.
func (f Farm) allRendered(_ context.Context, c transition.Change[Status], _ transition.View) error {
	frames, spooled, err := f.Job(c.ID)
	if err != nil {
		return err
	}
	rendered, err := f.Rendered(c.ID)
	if err != nil {
		return err
	}
	if !spooled || rendered < frames {
		return fmt.Errorf("%w: %d of %d rendered", errFramesMissing, rendered, frames)
	}
	return nil
}

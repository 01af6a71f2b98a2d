// Package proc runs the examples' child processes: the example's own
// binary in another role, configured through one environment variable,
// every child killed when the parent stops. A child says what it does
// twice: in prose on stdout, for the person running the example, and as
// structured events ([Emit]) on a pipe of their own, which the parent
// waits on ([Child.Await]). Rewording a line breaks no scenario.
package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RoleEnv is the environment variable that makes a binary run as a child:
// it holds the role and its configuration as JSON.
const RoleEnv = "EXECFSM_EXAMPLE_CHILD"

// eventsEnv tells a child that file descriptor 3 is its events pipe; a
// child's own children are told afresh, and a detached one not at all.
const eventsEnv = "EXECFSM_EXAMPLE_EVENTS"

// Event is something a child did, for its parent to wait on: what
// (Kind) and its particulars.
type Event struct {
	Kind  string            `json:"kind"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// Has reports whether e is of kind and has every attribute of want.
func (e Event) Has(kind string, want map[string]string) bool {
	if e.Kind != kind {
		return false
	}
	for k, v := range want {
		if e.Attrs[k] != v {
			return false
		}
	}
	return true
}

var (
	eventsOut = sync.OnceValue(func() *os.File {
		if os.Getenv(eventsEnv) != "3" {
			return nil
		}
		// Not inherited by this child's own children: one that outlives
		// it (a detached simulator) would hold the pipe open, and its
		// parent would wait for the end of its events forever.
		syscall.CloseOnExec(3)
		return os.NewFile(3, "events")
	})
	emitMu sync.Mutex
)

// Emit reports an event to the parent, when this process is a child
// started by [Group.Start]; attrs are key, value pairs. Elsewhere it does
// nothing.
func Emit(kind string, attrs ...string) {
	f := eventsOut()
	if f == nil {
		return
	}
	ev := Event{Kind: kind}
	if len(attrs) > 0 {
		ev.Attrs = make(map[string]string, len(attrs)/2)
		for i := 0; i+1 < len(attrs); i += 2 {
			ev.Attrs[attrs[i]] = attrs[i+1]
		}
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	emitMu.Lock()
	defer emitMu.Unlock()
	_, _ = f.Write(append(line, '\n'))
}

// Spec is what a child is told.
type Spec struct {
	Role   string          `json:"role"`
	Config json.RawMessage `json:"config"`
}

// ChildSpec returns the spec this process was started with, if it is a
// child.
func ChildSpec() (Spec, bool, error) {
	eventsOut() // claims the events pipe before anything is started
	raw := os.Getenv(RoleEnv)
	if raw == "" {
		return Spec{}, false, nil
	}
	var s Spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return Spec{}, true, fmt.Errorf("bad %s: %w", RoleEnv, err)
	}
	return s, true, nil
}

// Child is a running child process.
type Child struct {
	Name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	events []Event
	// tail is the last lines the child printed, for an error saying it
	// exited too soon: its own words on why are in them.
	tail  []string
	more  chan struct{} // closed and replaced when an event arrives
	done  chan struct{} // closed when the process has exited and its output is read
	state *os.ProcessState
}

// Group is every child a parent started, so none outlives it.
type Group struct {
	mu       sync.Mutex
	children []*Child
	// Echo, if set, receives the lines children print (those Show
	// accepts, all if Show is nil), prefixed with their names.
	Echo io.Writer
	Show func(line string) bool
}

// command returns this binary, set to run as a child in role.
func command(role string, config any) (*exec.Cmd, error) {
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(Spec{Role: role, Config: cfg})
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, eventsEnv+"=") && !strings.HasPrefix(kv, RoleEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, RoleEnv+"="+string(spec))
	return cmd, nil
}

// StartDetached runs this binary in role as a process meant to outlive
// this one, the way a Kubernetes Job outlives the controller that made
// it: its own process group, no death signal, output appended to
// logPath. It returns the pid; while this process lives it reaps the
// child when it ends.
func StartDetached(role string, config any, logPath string) (int, error) {
	cmd, err := command(role, config)
	if err != nil {
		return 0, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// Start runs this binary as a child in role with config (any value
// encodable as JSON).
func (g *Group) Start(name, role string, config any) (*Child, error) {
	cmd, err := command(role, config)
	if err != nil {
		return nil, err
	}
	// Own process group, so a Ctrl-C at the terminal reaches the parent
	// only and the parent decides how children end; and, on Linux, a
	// child is killed if the parent dies without cleaning up.
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	events, eventsIn, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{eventsIn} // file descriptor 3 in the child
	cmd.Env = append(cmd.Env, eventsEnv+"=3")
	c := &Child{Name: name, cmd: cmd, more: make(chan struct{}), done: make(chan struct{})}
	err = cmd.Start()
	_ = eventsIn.Close() // the child's now: the pipe ends when the child does
	if err != nil {
		_ = events.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	g.mu.Lock()
	g.children = append(g.children, c)
	echo, show := g.Echo, g.Show
	g.mu.Unlock()
	var reading sync.WaitGroup
	reading.Add(3)
	go func() { defer reading.Done(); c.read(stdout, echo, show) }()
	go func() { defer reading.Done(); c.read(stderr, echo, nil) }()
	go func() { defer reading.Done(); defer events.Close(); c.readEvents(events) }()
	go func() {
		reading.Wait()
		_ = cmd.Wait()
		c.mu.Lock()
		c.state = cmd.ProcessState
		c.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

// read echoes what the child prints, for the person running the example.
func (c *Child) read(r io.Reader, echo io.Writer, show func(string) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		if len(c.tail) == tailLines {
			c.tail = append(c.tail[:0], c.tail[1:]...)
		}
		c.tail = append(c.tail, line)
		c.mu.Unlock()
		if echo != nil && (show == nil || show(line)) {
			fmt.Fprintf(echo, "    %-8s| %s\n", c.Name, line)
		}
	}
}

// tailLines is how many of its last lines a Child keeps.
const tailLines = 40

// readEvents keeps the events the child reports; a line that is not one
// is the child's bug, kept as an event of kind "bad-event" so that a wait
// for something else fails with it in view.
func (c *Child) readEvents(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			ev = Event{Kind: "bad-event", Attrs: map[string]string{"line": sc.Text()}}
		}
		c.mu.Lock()
		c.events = append(c.events, ev)
		close(c.more)
		c.more = make(chan struct{})
		c.mu.Unlock()
	}
}

// PID returns the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Events returns the events the child reported so far.
func (c *Child) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// ErrExited is returned by Await when the child ended first.
var ErrExited = errors.New("child exited")

// Await waits until the child has reported an event of kind with every
// attribute of want, and returns it (the first such event since the
// child started).
func (c *Child) Await(ctx context.Context, kind string, want map[string]string, timeout time.Duration) (Event, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for seen := 0; ; {
		c.mu.Lock()
		for ; seen < len(c.events); seen++ {
			if ev := c.events[seen]; ev.Has(kind, want) {
				c.mu.Unlock()
				return ev, nil
			}
		}
		more := c.more
		c.mu.Unlock()
		select {
		case <-more:
		case <-c.done:
			// The last events may have arrived with the exit.
			c.mu.Lock()
			n := len(c.events)
			tail := strings.Join(c.tail, "\n    ")
			c.mu.Unlock()
			if seen == n {
				return Event{}, fmt.Errorf("%s: %w before reporting %s %v (reported: %v); its last lines:\n    %s", c.Name, ErrExited, kind, want, c.Events(), tail)
			}
		case <-deadline.C:
			return Event{}, fmt.Errorf("%s: no %s %v within %v (reported: %v)", c.Name, kind, want, timeout, c.Events())
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Signal sends sig to the child.
func (c *Child) Signal(sig syscall.Signal) error { return c.cmd.Process.Signal(sig) }

// Exit describes how a child ended.
type Exit struct {
	Code   int            // exit status, or -1 if killed by a signal
	Signal syscall.Signal // the signal that killed it, if any
}

func (e Exit) String() string {
	if e.Code == -1 {
		return "killed by " + SignalName(e.Signal)
	}
	return fmt.Sprintf("exit %d", e.Code)
}

// SignalName returns the conventional name of sig ("SIGTERM").
func SignalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGCONT:
		return "SIGCONT"
	}
	return sig.String()
}

// Wait waits for the child to end.
func (c *Child) Wait(ctx context.Context, timeout time.Duration) (Exit, error) {
	select {
	case <-c.done:
	case <-time.After(timeout):
		return Exit{}, fmt.Errorf("%s did not exit within %v", c.Name, timeout)
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := Exit{Code: c.state.ExitCode()}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	return e, nil
}

// KillAll kills every child still running and waits for them.
func (g *Group) KillAll() {
	g.mu.Lock()
	children := append([]*Child(nil), g.children...)
	g.mu.Unlock()
	for _, c := range children {
		select {
		case <-c.done:
			continue
		default:
		}
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// SyncWriter returns a writer that serialises writes to w, for output
// shared by the parent and the goroutines echoing its children.
func SyncWriter(w io.Writer) io.Writer { return &syncWriter{w: w} }

// SyncBuffer is a buffer the goroutines echoing children write while a
// test reads it; NewSyncBuffer makes one.
type SyncBuffer struct {
	syncWriter
	b *strings.Builder
}

// NewSyncBuffer returns an empty SyncBuffer.
func NewSyncBuffer() *SyncBuffer {
	b := &strings.Builder{}
	return &SyncBuffer{syncWriter: syncWriter{w: b}, b: b}
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

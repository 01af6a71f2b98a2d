// Package proc runs the examples' child processes: the example's own
// binary in another role, configured through one environment variable,
// with its output read line by line so the parent can wait for what it
// reports, and every child killed when the parent stops.
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

// Spec is what a child is told.
type Spec struct {
	Role   string          `json:"role"`
	Config json.RawMessage `json:"config"`
}

// ChildSpec returns the spec this process was started with, if it is a
// child.
func ChildSpec() (Spec, bool, error) {
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

	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced when a line arrives
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
	cmd.Env = append(os.Environ(), RoleEnv+"="+string(spec))
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
	c := &Child{Name: name, cmd: cmd, more: make(chan struct{}), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	g.mu.Lock()
	g.children = append(g.children, c)
	echo, show := g.Echo, g.Show
	g.mu.Unlock()
	var reading sync.WaitGroup
	reading.Add(2)
	go func() { defer reading.Done(); c.read(stdout, echo, show, true) }()
	go func() { defer reading.Done(); c.read(stderr, echo, nil, false) }()
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

func (c *Child) read(r io.Reader, echo io.Writer, show func(string) bool, keep bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if echo != nil && (show == nil || show(line)) {
			fmt.Fprintf(echo, "    %-8s| %s\n", c.Name, line)
		}
		if !keep {
			continue
		}
		c.mu.Lock()
		c.lines = append(c.lines, line)
		close(c.more)
		c.more = make(chan struct{})
		c.mu.Unlock()
	}
}

// PID returns the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Lines returns what the child printed on stdout so far.
func (c *Child) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// ErrExited is returned by WaitFor when the child ended first.
var ErrExited = errors.New("child exited")

// WaitFor waits until the child has printed a line with the given prefix
// and returns it (the first such line).
func (c *Child) WaitFor(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for seen := 0; ; {
		c.mu.Lock()
		for ; seen < len(c.lines); seen++ {
			if strings.HasPrefix(c.lines[seen], prefix) {
				line := c.lines[seen]
				c.mu.Unlock()
				return line, nil
			}
		}
		more := c.more
		c.mu.Unlock()
		select {
		case <-more:
		case <-c.done:
			// The last lines may have arrived with the exit.
			c.mu.Lock()
			n := len(c.lines)
			c.mu.Unlock()
			if seen == n {
				return "", fmt.Errorf("%s: %w before printing %q", c.Name, ErrExited, prefix)
			}
		case <-deadline:
			return "", fmt.Errorf("%s: no %q within %v", c.Name, prefix, timeout)
		case <-ctx.Done():
			return "", ctx.Err()
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

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

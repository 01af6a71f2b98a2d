// Renderfarm is a controller written as a new user writes one, from the
// README and `go doc` alone: a render farm whose jobs have a lifecycle of
// their own (queued, rendering, paused, moving, cancelling, done, failed,
// cancelled), a guard (a job is done only when every frame is on disk),
// roles for the recovery decisions, the embedded store, and Prometheus
// metrics served over HTTP. run.Manage is the rest: it adopts the jobs
// users drop into a spool directory, takes each over and decides on it,
// calls the farm's sync until the job ends, and on SIGTERM relocates or
// shuts every job down as the platform means it (controller.go; the
// test counts what of it touches the library).
//
// This program plays the platform: it submits two jobs and runs the
// controller (itself, in another role) three times, with real signals:
//
//  1. The controller is SIGKILLed in the middle of rendering (an OOM kill).
//  2. A user withdraws one job while no controller runs. The next
//     controller resumes the other, counting an unexpected restart, and
//     cancels the withdrawn one. Then SIGTERM: the platform is moving it;
//     it writes moving and exits 143.
//  3. The last controller resumes from moving, without counting a restart,
//     and renders to the end: done.
//
// The farm reads each controller's /metrics to know when to act, and at
// the end prints every job's audit trail from the store.
//
//	go run ./examples/renderfarm
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/recovery"
)

// envFarmDir, when set, makes this program the controller of the farm in
// that directory, on the platform envPlatform names (a Kubernetes Job if
// it is unset).
const (
	envFarmDir  = "RENDERFARM_DIR"
	envPlatform = "RENDERFARM_PLATFORM"
)

// platforms are the platforms a controller runs on, by name.
var platforms = map[string]recovery.Platform{}

func init() {
	for _, p := range []recovery.Platform{recovery.KubernetesJob, recovery.KubernetesDeployment,
		recovery.SystemdOnFailure, recovery.SystemdAlways, recovery.Unmanaged} {
		platforms[p.Name] = p
	}
}

// controllerMain is this program as a controller: the farm and the
// platform from the environment.
func controllerMain(dir string) int {
	name := cmp.Or(os.Getenv(envPlatform), recovery.KubernetesJob.Name)
	platform, ok := platforms[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "renderfarm: no platform %q\n", name)
		return 2
	}
	return runController(Farm{Dir: dir}, platform, os.Stdout)
}

// waitLimit bounds every wait for a controller to get somewhere.
const waitLimit = time.Minute

func main() {
	if dir := os.Getenv(envFarmDir); dir != "" {
		os.Exit(controllerMain(dir))
	}
	if err := playInTempDir(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "renderfarm:", err)
		os.Exit(1)
	}
}

// playInTempDir plays the farm in a directory of its own, removed after.
func playInTempDir(out io.Writer) error {
	dir, err := os.MkdirTemp("", "renderfarm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return play(context.Background(), Farm{Dir: dir}, out)
}

// The jobs the farm submits: the first is rendered across all three
// controllers, the second is withdrawn after the first.
const (
	shotID         = "shot-1"
	shotFrames     = 120
	trailerID      = "trailer"
	trailerFrames  = 40
	killAfterFrame = 3
)

// play runs the three controllers and prints what happened.
func play(ctx context.Context, farm Farm, out io.Writer) error {
	// The play's lines, and each controller's log and lines, copied by
	// goroutines of their own, all go to out: one write at a time.
	out = proc.SyncWriter(out)
	if err := farm.Submit(shotID, shotFrames); err != nil {
		return err
	}
	if err := farm.Submit(trailerID, trailerFrames); err != nil {
		return err
	}

	fmt.Fprintln(out, "run 1: rendering, then SIGKILL")
	run, err := startController(ctx, farm, recovery.KubernetesJob, out)
	if err != nil {
		return err
	}
	if err := run.await(ctx, "frame "+strconv.Itoa(killAfterFrame)+" of "+shotID, func(*metrics) (bool, error) {
		n, err := farm.Rendered(shotID)
		return n >= killAfterFrame, err
	}); err != nil {
		return run.fail(err)
	}
	if code := run.signal(syscall.SIGKILL); code != -1 {
		return fmt.Errorf("run 1 exited %d, want killed", code)
	}

	fmt.Fprintln(out, "run 2: the trailer withdrawn; resume after the crash, then SIGTERM")
	if err := farm.Withdraw(trailerID); err != nil {
		return err
	}
	run, err = startController(ctx, farm, recovery.KubernetesJob, out)
	if err != nil {
		return err
	}
	if err := run.await(ctx, "a counted restart and the trailer cancelled", func(m *metrics) (bool, error) {
		return m.value("execfsm_failovers_total") >= 1 &&
			m.value("execfsm_transitions_total", "from", "cancelling", "to", "cancelled", "result", "done") >= 1, nil
	}); err != nil {
		return run.fail(err)
	}
	if code := run.signal(syscall.SIGTERM); code != 143 {
		return run.fail(fmt.Errorf("run 2 exited %d after SIGTERM, want 143 (relocated)", code))
	}

	fmt.Fprintln(out, "run 3: resume from moving, render to the end")
	run, err = startController(ctx, farm, recovery.KubernetesJob, out)
	if err != nil {
		return err
	}
	if err := run.await(ctx, shotID+" done", func(m *metrics) (bool, error) {
		return m.value("execfsm_transitions_total", "from", "rendering", "to", "done", "result", "done") >= 1, nil
	}); err != nil {
		return run.fail(err)
	}
	if code := run.signal(syscall.SIGTERM); code != 0 {
		return fmt.Errorf("run 3 exited %d with nothing left to hand over, want 0", code)
	}
	return printTrails(farm, out)
}

// printTrails prints every job's audit trail, read from the store now
// that no controller holds it.
func printTrails(farm Farm, out io.Writer) error {
	db, err := boltstore.Open(farm.dbPath(), boltstore.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := db.Store("renders")
	if err != nil {
		return err
	}
	for _, job := range []struct {
		id     string
		frames int
	}{{shotID, shotFrames}, {trailerID, trailerFrames}} {
		id, frames := job.id, job.frames
		rec, err := store.Get(context.Background(), id)
		if err != nil {
			return err
		}
		restarts, err := recovery.FailoverCount(rec)
		if err != nil {
			return err
		}
		rendered, err := farm.Rendered(id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s, %d of %d frames, %d unexpected restart(s)\n", id, rec.Status, rendered, frames, restarts.Total())
		for _, e := range rec.History.All() {
			if e.From == e.To {
				continue // progress and take-overs: the moves tell the story
			}
			fmt.Fprintf(out, "  %-12s %-10s → %-10s %s\n", e.Actor, e.From, e.To, e.Reason)
		}
	}
	return nil
}

// controllerRun is one controller process.
type controllerRun struct {
	cmd     *exec.Cmd
	metrics string        // its /metrics address
	exited  chan struct{} // closed when it exited
	lines   chan string   // what it prints, after the metrics address
}

// startController starts the controller process on platform and waits
// for its metrics address.
func startController(ctx context.Context, farm Farm, platform recovery.Platform, out io.Writer) (*controllerRun, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envFarmDir+"="+farm.Dir, envPlatform+"="+platform.Name)
	cmd.Stderr = out // copied by a goroutine of os/exec's: out takes one write at a time (play)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	run := &controllerRun{cmd: cmd, exited: make(chan struct{}), lines: make(chan string, 1)}
	go func() {
		defer close(run.exited)
		scanner := bufio.NewScanner(stdout)
		served := false
		for scanner.Scan() {
			line := scanner.Text()
			if addr, ok := strings.CutPrefix(line, "metrics "); ok && !served {
				served = true
				run.lines <- addr
				continue
			}
			fmt.Fprintln(out, "  |", line)
		}
		cmd.Wait()
	}()
	select {
	case run.metrics = <-run.lines:
		return run, nil
	case <-run.exited:
		return nil, fmt.Errorf("controller exited before serving metrics: %v", cmd.ProcessState)
	case <-time.After(waitLimit):
		run.signal(syscall.SIGKILL)
		return nil, errors.New("controller did not serve metrics within a minute")
	case <-ctx.Done():
		run.signal(syscall.SIGKILL)
		return nil, ctx.Err()
	}
}

// await polls the controller's metrics until ready says so.
func (r *controllerRun) await(ctx context.Context, what string, ready func(*metrics) (bool, error)) error {
	deadline := time.After(waitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		m, err := scrape(ctx, r.metrics)
		if err != nil {
			return err
		}
		if ok, err := ready(m); ok || err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-r.exited:
			return fmt.Errorf("controller exited (%v) before %s", r.cmd.ProcessState, what)
		case <-deadline:
			return fmt.Errorf("no %s within a minute", what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signal sends sig and returns the exit code, -1 if a signal killed it.
func (r *controllerRun) signal(sig syscall.Signal) int {
	r.cmd.Process.Signal(sig)
	select {
	case <-r.exited:
	case <-time.After(waitLimit):
		r.cmd.Process.Kill()
		<-r.exited
	}
	return r.cmd.ProcessState.ExitCode()
}

// fail stops the controller and returns err.
func (r *controllerRun) fail(err error) error {
	r.signal(syscall.SIGKILL)
	return err
}

// metrics is one scrape of a /metrics page, in Prometheus' text format.
type metrics struct{ lines []string }

func scrape(ctx context.Context, url string) (*metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &metrics{lines: strings.Split(string(body), "\n")}, nil
}

// value sums the samples of name whose labels include the given
// name-value pairs.
func (m *metrics) value(name string, labels ...string) float64 {
	var sum float64
	for _, line := range m.lines {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		matches := true
		for i := 0; i+1 < len(labels); i += 2 {
			matches = matches && strings.Contains(series, labels[i]+`="`+labels[i+1]+`"`)
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil && matches {
			sum += v
		}
	}
	return sum
}

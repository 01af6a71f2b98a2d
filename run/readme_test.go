package run_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The README's quick start, built as a program and run in each case on
// each platform, exits as docs/controllers.md's table says: 0 when the
// outcome is in the record (finished, failed), the leave code when a live
// holder keeps the execution (143 where only a failure is restarted, 0
// elsewhere), and after a SIGTERM 143 where the platform drains (a
// relocation) and 0 where it stops (a shutdown). The test patches a copy:
// the platform, the record the master leaves, a work that runs until it
// is cancelled, and the signals it sends. Every patch must apply.
func TestTheQuickStartExitsAsTheTableSays(t *testing.T) {
	bin := buildQuickStart(t)
	type want struct{ job, deployment, systemdOnFailure, systemdAlways, unmanaged int }
	for _, tc := range []struct {
		name   string
		status string // the record's status after the program
		codes  want
	}{
		{"finished", "completed", want{0, 0, 0, 0, 0}},
		{"decided-fail", "failed", want{0, 0, 0, 0, 0}},
		{"held", "initializing", want{143, 0, 143, 0, 0}},
		{"sigterm", "", want{143, 143, 0, 0, 0}}, // relocating where it drains, terminated where it stops
	} {
		for platform, code := range map[string]int{"kubernetes-job": tc.codes.job, "kubernetes-deployment": tc.codes.deployment,
			"systemd-on-failure": tc.codes.systemdOnFailure, "systemd-always": tc.codes.systemdAlways, "unmanaged": tc.codes.unmanaged} {
			t.Run(tc.name+"/"+platform, func(t *testing.T) {
				got, status := runQuickStart(t, bin, tc.name, platform)
				require.Equal(t, code, got, "exit code")
				want := tc.status
				if want == "" {
					want = map[int]string{143: "relocating", 0: "terminated"}[code]
				}
				require.Equal(t, want, status)
			})
		}
	}
}

// quickStartPatches make the README's program playable: each old text
// must be in the block exactly once.
var quickStartPatches = []struct{ old, new string }{
	{"Platform: recovery.KubernetesJob, Resumable: true,", "Platform: platformOf(), Resumable: os.Getenv(\"CASE\") != \"decided-fail\", Signals: signals,"},
	{"return recovery.Ending{Finished: ctx.Err() == nil}", "work(ctx)\n\t\t\treturn recovery.Ending{Finished: ctx.Err() == nil}"},
	{"\tcode, err := run.Run(", "\tsignals := seed(ctx, store)\n\tcode, err := run.Run("},
	{"\tos.Exit(code)", "\tprintStatus(ctx, store)\n\tos.Exit(code)"},
	{"\nimport (\n", "\nimport (\n\t\"fmt\"\n\t\"os/signal\"\n\t\"syscall\"\n\t\"time\"\n"},
}

// quickStartHelpers are the patched program's own functions: the case it
// plays comes from CASE, the platform from PLATFORM.
const quickStartHelpers = `
func platformOf() recovery.Platform {
	for _, p := range []recovery.Platform{recovery.KubernetesJob, recovery.KubernetesDeployment,
		recovery.SystemdOnFailure, recovery.SystemdAlways, recovery.Unmanaged} {
		if p.Name == os.Getenv("PLATFORM") {
			return p
		}
	}
	panic("no platform " + os.Getenv("PLATFORM"))
}

// seed leaves the record as the case needs it, then says ready: from then
// on a SIGTERM reaches the returned channel.
func seed(ctx context.Context, store *storage.Memory) <-chan os.Signal {
	switch os.Getenv("CASE") {
	case "decided-fail": // its controller died while it ran
		master, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-42", transition.PersistedOptions{Actor: "master"})
		if _, err := master.Fire(ctx, state.Running, "started"); err != nil {
			log.Fatal(err)
		}
	case "held": // a live controller holds it
		if _, _, err := store.Acquire(ctx, "ex-42", storage.Lease{Holder: "pod-z", TTL: time.Minute}); err != nil {
			log.Fatal(err)
		}
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	if os.Getenv("CASE") != "sigterm" {
		fmt.Println("ready")
	}
	return signals
}

// work runs until a SIGTERM cancels it, in the sigterm case.
func work(ctx context.Context) {
	if os.Getenv("CASE") == "sigterm" {
		fmt.Println("ready")
		<-ctx.Done()
	}
}

// printStatus prints the record's status as the program leaves it.
func printStatus(ctx context.Context, store *storage.Memory) {
	rec, err := store.Get(ctx, "ex-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status", rec.Status)
}
`

// readmeQuickStart is the README's quick start block.
var readmeQuickStart = regexp.MustCompile("(?s)## Quick start.*?<!-- go: run -->\\s*```go\n(.*?)```")

// buildQuickStart builds the patched quick start against this checkout.
func buildQuickStart(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	m := readmeQuickStart.FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no Quick start block marked <!-- go: run -->")
	src := string(m[1])
	for _, p := range quickStartPatches {
		require.Equal(t, 1, strings.Count(src, p.old), "the README's quick start no longer has %q: update the patch", p.old)
		src = strings.Replace(src, p.old, p.new, 1)
	}
	src += quickStartHelpers
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	goMod := "module quickstart\n\ngo 1.25.0\n\nrequire github.com/execfsm/execfsm v0.0.0\n\nreplace github.com/execfsm/execfsm => " + root + "\n"
	for name, text := range map[string]string{"go.mod": goMod, "go.sum": string(sum), "main.go": src} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	bin := filepath.Join(dir, "quickstart")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the README's quick start:\n%s\n%s", out, src)
	return bin
}

// runQuickStart runs the program in one case on one platform, sends it
// SIGTERM once it is ready (not in the cases that end by themselves),
// and returns its exit code and the record's status it printed.
func runQuickStart(t *testing.T, bin, name, platform string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "CASE="+name, "PLATFORM="+platform)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	status := ""
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "ready" && (name == "held" || name == "sigterm"):
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		case strings.HasPrefix(line, "status "):
			status = strings.TrimPrefix(line, "status ")
		}
	}
	err = cmd.Wait()
	require.NoError(t, ctx.Err(), "the program did not end within a minute: %s", stderr.String())
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return cmd.ProcessState.ExitCode(), status
}

// Command testall runs every test of every module of this repository the
// way its users get each module: on the module's own go.mod (GOWORK=off,
// so the dependency versions are the module's, not the workspace's), with
// the repository's other modules served at their next version from a local
// module proxy packed from the working tree, under the race detector.
//
// Before that it makes sure the Kubernetes test assets exist (built once
// per machine, with the build's progress shown) and a Chromium for the
// page tests (Debian's package, installed once per machine), and proves installation
// as a user does it: in a fresh module it `go get`s the public modules and
// builds every Go block of README.md and docs/*.md marked
// `<!-- go: build -->`, running those marked `<!-- go: run -->` and
// testing those marked `<!-- go: test -->` (a _test.go file of its own
// package, run under the race detector without KUBEBUILDER_ASSETS:
// kubetest finds its binaries from the module cache, as in a user's
// module).
//
//	go run ./tools/testall              # from the repository root
//	go run ./tools/testall -run Lease   # flags go to every go test
//
// It tests two modules at a time (EXECFSM_TESTALL_PARALLEL=N for N), the
// slowest of the last run first, printing each module's output whole
// when it ends.
//
// Interrupting it stops every process it started, and any a test left
// behind (on Linux testall adopts orphans and kills them).
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/tools/internal/proxy"
	"golang.org/x/mod/modfile"
)

// repoPrefix is the path every module of the repository starts with.
const repoPrefix = "github.com/execfsm/execfsm"

// testTimeout bounds each module's go test run: the first run on a new
// machine compiles etcd and Kubernetes client code under -race.
const testTimeout = "30m"

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./tools/testall [go test flags]")
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := adoptOrphans(); err != nil {
		fmt.Fprintln(os.Stderr, "testall: cannot adopt orphaned processes:", err)
	}
	start := time.Now()
	err := run(ctx, flag.Args())
	if left := killOrphans(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testall: killed what was left behind: %s\n", strings.Join(left, ", "))
	}
	fmt.Fprintf(os.Stderr, "testall: %s after %s\n", verdict(err), time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testall:", err)
		os.Exit(1)
	}
}

func verdict(err error) string {
	if err != nil {
		return "FAIL"
	}
	return "ok"
}

type mod struct{ path, dir string }

func run(ctx context.Context, testFlags []string) error {
	mods, err := workspaceModules(ctx)
	if err != nil {
		return err
	}
	version, err := releaseVersion(mods)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "execfsm-testall-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	env, err := moduleEnv(ctx, tmp, mods, version)
	if err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		step("Kubernetes test assets (built once per machine, then cached)")
		assets, err := output(ctx, mods[0].dir, nil, "bash", filepath.Join("kube", "hack", "test-assets.sh"))
		if err != nil {
			return fmt.Errorf("kube/hack/test-assets.sh: %w", err)
		}
		env = append(env, "KUBEBUILDER_ASSETS="+strings.TrimSpace(assets))
	}

	step("Chromium for the admin page's browser tests (Debian's package, installed once per machine)")
	chromium, err := output(ctx, mods[0].dir, nil, "bash", filepath.Join("hack", "chromium.sh"))
	if err != nil {
		return fmt.Errorf("hack/chromium.sh: %w", err)
	}
	env = append(env, "CHROMIUM="+strings.TrimSpace(chromium))

	step("every module but the CLI's loads on its own go.mod, without the workspace")
	if err := loadsAlone(ctx, mods); err != nil {
		return err
	}

	step(fmt.Sprintf("installing the public modules at %s in a fresh module, as the README says", version))
	if err := installTest(ctx, tmp, mods, env, version); err != nil {
		return fmt.Errorf("installation: %w", err)
	}

	lanes, err := parallelModules()
	if err != nil {
		return err
	}
	times := loadDurations(durationsFile())
	failed, passed := testModules(ctx, os.Stderr, slowestFirst(mods, times), lanes, func(m mod, w io.Writer) error {
		return testModule(ctx, tmp, m, env, testFlags, w, lanes == 1)
	})
	if len(testFlags) == 0 { // a -run or -short run is no measure of the next
		maps.Copy(times.took, passed)
		if err := times.save(); err != nil {
			fmt.Fprintln(os.Stderr, "testall: the modules' test times were not kept for the next run's order:", err)
		}
	}
	if left := killOrphans(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testall: the module tests left processes behind, killed: %s\n", strings.Join(left, ", "))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) > 0 {
		return fmt.Errorf("tests failed in %s", strings.Join(failed, ", "))
	}
	step("across the last release: its store modules on the core now, and the store modules now on its core")
	return skewTest(ctx, mods[0].dir, tmp, mods, env, os.Stderr)
}

// parallelEnv names the number of modules tested at once (default 2).
const parallelEnv = "EXECFSM_TESTALL_PARALLEL"

// parallelModules is the number of modules tested at once. Most of a
// module's test time is waiting (fsyncs, an API server, child
// processes) on one dominant package, so two modules side by side cut
// the module tests on two cores from 8.5 to about 5 minutes. (The first
// CI run so failed examples/reconcile: side by side with the Kubernetes
// tests, a race in the example between creating a simulator and the
// loop taking it over, fixed since; a test that fails under load is a
// bug found.)
func parallelModules() (int, error) {
	raw := os.Getenv(parallelEnv)
	if raw == "" {
		return 2, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a number of modules, at least 1", parallelEnv, raw)
	}
	return n, nil
}

// durations are the modules' test times in the last run that passed
// them, by module path, kept in a file between runs: the lanes start
// with the slowest, so that no long module starts last and runs alone.
type durations struct {
	file string
	took map[string]time.Duration
}

// durationsFile is where the test times are kept: beside the
// Kubernetes test assets, in the user's cache. "" if there is none.
func durationsFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "execfsm", "testall-durations.json")
}

// loadDurations reads the times kept in file; none if it is missing or
// unreadable (the order is then the workspace's: only speed depends on
// it).
func loadDurations(file string) *durations {
	d := &durations{file: file, took: map[string]time.Duration{}}
	if file == "" {
		return d
	}
	if data, err := os.ReadFile(file); err == nil {
		var took map[string]time.Duration
		if json.Unmarshal(data, &took) == nil {
			for path, t := range took {
				if t > 0 {
					d.took[path] = t
				}
			}
		}
	}
	return d
}

// save writes the times back, through a temporary file renamed over the
// old one, so that two runs at once leave one whole file.
func (d *durations) save() error {
	if d.file == "" {
		return nil
	}
	data, err := json.Marshal(d.took)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(d.file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(d.file), ".testall-durations-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), d.file)
}

// slowestFirst orders mods by the time their tests took in the last
// run that passed them whole, slowest first; a module with no time yet
// goes before every timed one, as if slow, and the order among equals is
// the workspace's.
func slowestFirst(mods []mod, times *durations) []mod {
	out := slices.Clone(mods)
	slices.SortStableFunc(out, func(a, b mod) int {
		ta, oka := times.took[a.path]
		tb, okb := times.took[b.path]
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		}
		return cmp.Compare(tb, ta)
	})
	return out
}

// testModules runs test over every module, lanes at a time, in the
// order given, and returns the paths of those that failed and how long
// each of the others took, by path. Each
// module's output is kept and written to w whole when it ends, under a
// header saying how it went, so that two modules' lines never mix.
func testModules(ctx context.Context, w io.Writer, mods []mod, lanes int, test func(mod, io.Writer) error) (failed []string, passed map[string]time.Duration) {
	// Only this goroutine writes to w: the lanes say what they start
	// and how it ended on done.
	type outcome struct {
		m       mod
		started bool
		output  []byte
		err     error
		took    time.Duration
	}
	todo := make(chan mod)
	done := make(chan outcome)
	var workers sync.WaitGroup
	for range lanes {
		workers.Go(func() {
			for m := range todo {
				done <- outcome{m: m, started: true}
				start := time.Now()
				var out bytes.Buffer
				err := test(m, &out)
				done <- outcome{m: m, output: out.Bytes(), err: err, took: time.Since(start)}
			}
		})
	}
	go func() {
		defer close(todo)
		for _, m := range mods {
			select {
			case todo <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { workers.Wait(); close(done) }()
	passed = map[string]time.Duration{}
	for o := range done {
		if o.started {
			stepTo(w, fmt.Sprintf("%s, on its own go.mod: started", o.m.path))
			continue
		}
		stepTo(w, fmt.Sprintf("%s, on its own go.mod: %s after %s", o.m.path, verdict(o.err), o.took.Round(time.Second)))
		_, _ = w.Write(o.output)
		if o.err != nil {
			fmt.Fprintln(w, "testall:", o.err)
			failed = append(failed, o.m.path)
		} else {
			passed[o.m.path] = o.took
		}
	}
	return failed, passed
}

func step(what string) { stepTo(os.Stderr, what) }

// stepTo writes the header of a step to w, in one Write.
func stepTo(w io.Writer, what string) {
	fmt.Fprintf(w, "\n== %s  [%s]\n", what, time.Now().Format("15:04:05"))
}

// workspaceModules lists the modules of go.work, the root first.
func workspaceModules(ctx context.Context) ([]mod, error) {
	out, err := output(ctx, "", nil, "go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}")
	if err != nil {
		return nil, fmt.Errorf("listing the workspace's modules (run from the repository): %w", err)
	}
	var mods []mod
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		path, dir, _ := strings.Cut(line, "\t")
		if path == repoPrefix || strings.HasPrefix(path, repoPrefix+"/") {
			mods = append(mods, mod{path, dir})
		}
	}
	slices.SortStableFunc(mods, func(a, b mod) int { return len(a.path) - len(b.path) })
	if len(mods) == 0 || mods[0].path != repoPrefix {
		return nil, errors.New("the workspace has no " + repoPrefix + " module: run from the repository")
	}
	return mods, nil
}

// releaseVersion is the version the modules require each other at: the
// one they will be released at together. They must agree.
func releaseVersion(mods []mod) (string, error) {
	versions := map[string][]string{}
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
		if err != nil {
			return "", err
		}
		f, err := modfile.ParseLax(filepath.Join(m.dir, "go.mod"), data, nil)
		if err != nil {
			return "", err
		}
		for _, r := range f.Require {
			if r.Mod.Path == repoPrefix || strings.HasPrefix(r.Mod.Path, repoPrefix+"/") {
				versions[r.Mod.Version] = append(versions[r.Mod.Version], m.path+" → "+r.Mod.Path)
			}
		}
	}
	if len(versions) != 1 {
		return "", fmt.Errorf("the modules require each other at %d versions, want one (hack/release.sh sets them): %v", len(versions), versions)
	}
	for v := range versions {
		return v, nil
	}
	panic("unreachable")
}

// moduleEnv packs every module into a proxy under tmp and returns the
// environment that installs them from it, each checked against its own
// go.mod and the checksum database for everything else.
func moduleEnv(ctx context.Context, tmp string, mods []mod, version string) ([]string, error) {
	// The go command keeps what it downloaded by version and would go on
	// using a copy packed from an older working tree: forget every copy
	// of this repository's modules first.
	if err := forgetDownloads(ctx); err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, "proxy")
	for _, m := range mods {
		if _, err := proxy.Pack(version, dir, m.dir); err != nil {
			return nil, err
		}
	}
	upstream, err := output(ctx, "", nil, "go", "env", "GOPROXY")
	if err != nil {
		return nil, err
	}
	// The go command indexes a module in its cache once, by directory
	// alone (cmd/go/internal/modindex: cached modules are immutable), so
	// after a re-pack at the same version it would go on building the
	// old file list: a file added since is not compiled, an import added
	// since is not found. Without the index it reads the directories.
	godebug := "goindex=0"
	if prev := os.Getenv("GODEBUG"); prev != "" {
		godebug = prev + "," + godebug
	}
	return append(os.Environ(),
		"GODEBUG="+godebug,
		"GOWORK=off",
		"GOPROXY=file://"+filepath.ToSlash(dir)+","+strings.TrimSpace(upstream),
		// The local versions are not in the checksum database (they are
		// not published); everything else still is checked against it.
		"GONOSUMDB="+repoPrefix,
		"GOFLAGS=-mod=mod",
	), nil
}

// forgetDownloads removes this repository's modules from the module
// cache (extracted copies and downloads), which the go command keeps
// read-only.
func forgetDownloads(ctx context.Context) error {
	cache, err := output(ctx, "", nil, "go", "env", "GOMODCACHE")
	if err != nil {
		return err
	}
	cache = strings.TrimSpace(cache)
	// Nested modules sit under the root's path, the root itself next to
	// it as path@version.
	dirs, _ := filepath.Glob(filepath.Join(cache, repoPrefix+"@*"))
	dirs = append(dirs, filepath.Join(cache, repoPrefix), filepath.Join(cache, "cache", "download", repoPrefix))
	for _, dir := range dirs {
		if err := removeReadOnly(dir); err != nil {
			return err
		}
	}
	return nil
}

// removeReadOnly removes dir and everything in it, its directories made
// writable first.
func removeReadOnly(dir string) error {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// testModule runs go test over every package of m, with a copy of its
// go.mod and go.sum (-modfile) so that the checksums of the local
// versions are never written into the working tree. The copy drops the
// go.mod's replaces of this repository's modules, which point at the
// sibling directories: the tests get the siblings from the proxy, packed
// as users will get them.
//
// Its commands write to w; alone says nothing else testall started runs
// beside it, so that what its commands leave behind is reaped after each.
func testModule(ctx context.Context, tmp string, m mod, env, testFlags []string, w io.Writer, alone bool) error {
	name := strings.ReplaceAll(strings.TrimPrefix(m.path, repoPrefix), "/", "_")
	modFile := filepath.Join(tmp, "root"+name+".mod")
	if err := copyWithoutOwnReplaces(filepath.Join(m.dir, "go.mod"), modFile); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(m.dir, "go.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(modFile, ".mod")+".sum", withoutOwnSums(sum), 0o644); err != nil {
		return err
	}
	args := append([]string{"test", "-race", "-timeout", testTimeout, "-modfile=" + modFile}, testFlags...)
	if err := runTo(ctx, w, w, alone, m.dir, env, "go", append(args, "./...")...); err != nil {
		return err
	}
	if m.path != repoPrefix {
		return nil
	}
	return reintroduceBugs(ctx, tmp, m, env, args, w, alone)
}

// reintroducedDir holds the bugs package recovery once had, each a patch
// of its files; the shipped files carry none of them.
const reintroducedDir = "recovery/fleettest/testdata/reintroduced"

// reintroduceBugs shows the fleet explorer finds each bug package
// recovery once had: for each patch of reintroducedDir it applies the
// patch to a copy of the root module and runs there the explorer's tests
// of that bug (TestReintroduced*, built with the tag reintroduced_<name>),
// which must find it. A patch that no longer applies fails the run.
func reintroduceBugs(ctx context.Context, tmp string, m mod, env, args []string, w io.Writer, alone bool) error {
	patches, err := filepath.Glob(filepath.Join(m.dir, reintroducedDir, "*.patch"))
	if err != nil {
		return err
	}
	if len(patches) == 0 {
		return fmt.Errorf("no patches in %s", reintroducedDir)
	}
	for _, patch := range patches {
		name := strings.TrimSuffix(filepath.Base(patch), ".patch")
		copyDir := filepath.Join(tmp, "reintroduced-"+name)
		if err := copyModule(m.dir, copyDir); err != nil {
			return err
		}
		if err := runTo(ctx, w, w, alone, copyDir, env, "git", "apply", patch); err != nil {
			return fmt.Errorf("the bug %s no longer applies to package recovery: update %s: %w", name, patch, err)
		}
		tagged := append(slices.Clone(args), "-tags", "reintroduced_"+name, "-run", "^TestReintroduced", "./recovery/fleettest")
		if err := runTo(ctx, w, w, alone, copyDir, env, "go", tagged...); err != nil {
			return fmt.Errorf("the fleet explorer with the bug %s: %w", name, err)
		}
		if err := os.RemoveAll(copyDir); err != nil {
			return err
		}
	}
	return nil
}

// isModule reports whether dir is the root of a module of its own.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// copyModule copies the files of the module in dir (not .git, not the
// modules nested in it) to dst.
func copyModule(dir, dst string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if rel != "." {
				if d.Name() == ".git" {
					return filepath.SkipDir
				}
				if isModule(path) {
					return filepath.SkipDir // a module of its own
				}
			}
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// readmeBlock matches a Go block of README.md, or of a page of docs/,
// marked for the installation test.
var readmeBlock = regexp.MustCompile("(?s)<!-- go: (build|run|test) -->\\s*```go\n(.*?)```")

// markedBlocks returns the marked Go blocks of README.md and then of
// docs/*.md: the README must have one.
func markedBlocks(root string) ([][][]byte, error) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	blocks := readmeBlock.FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		return nil, errors.New("README.md has no Go block marked <!-- go: build --> or <!-- go: run -->")
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, readmeBlock.FindAllSubmatch(text, -1)...)
	}
	return blocks, nil
}

// installTest makes a fresh module, gets the public modules the way the
// README says, and builds (and runs, or tests, where marked) the Go
// blocks of the README and of docs/.
func installTest(ctx context.Context, tmp string, mods []mod, env []string, version string) error {
	blocks, err := markedBlocks(mods[0].dir)
	if err != nil {
		return err
	}
	dir := filepath.Join(tmp, "user")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := stream(ctx, dir, env, "go", "mod", "init", "example.com/user"); err != nil {
		return err
	}
	var run, tests []string
	for k, b := range blocks {
		pkg := fmt.Sprintf("readme%d", k+1)
		if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
			return err
		}
		file := "main.go"
		if string(b[1]) == "test" {
			file = "user_test.go"
			tests = append(tests, "./"+pkg)
		}
		if err := os.WriteFile(filepath.Join(dir, pkg, file), b[2], 0o644); err != nil {
			return err
		}
		if string(b[1]) == "run" {
			run = append(run, "./"+pkg)
		}
	}
	get := []string{"get"}
	for _, m := range mods {
		if public(m.path) {
			get = append(get, m.path+"@"+version)
		}
	}
	for _, args := range [][]string{get, {"mod", "tidy"}, {"vet", "./..."}} {
		if err := stream(ctx, dir, env, "go", args...); err != nil {
			return err
		}
	}
	for _, pkg := range run {
		if err := stream(ctx, dir, env, "go", "run", pkg); err != nil {
			return fmt.Errorf("the README's %s: %w", pkg, err)
		}
	}
	// A user's tests find what they need themselves: kubetest its
	// binaries through the script in the module cache, not the
	// KUBEBUILDER_ASSETS this run set for the repository's own tests.
	for _, pkg := range tests {
		if err := stream(ctx, dir, without(env, "KUBEBUILDER_ASSETS"), "go", "test", "-race", "-count=1", pkg); err != nil {
			return fmt.Errorf("the docs' test %s: %w", pkg, err)
		}
	}
	// The operator CLI installs as commands do, and runs.
	bin := filepath.Join(tmp, "bin")
	if err := stream(ctx, dir, append(env, "GOBIN="+bin), "go", "install", repoPrefix+cliPath+"@"+version); err != nil {
		return fmt.Errorf("installing the CLI: %w", err)
	}
	if err := stream(ctx, dir, env, filepath.Join(bin, "execfsm"), "diagram"); err != nil {
		return fmt.Errorf("the installed CLI: %w", err)
	}
	return nil
}

// without returns env without the variable name.
func without(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// cliPath is the operator CLI's module, under the repository's.
const cliPath = "/cmd/execfsm"

// public reports whether users install the module: the library, its
// stores and its bridges, not the examples, the suites or these tools.
func public(path string) bool {
	switch strings.TrimPrefix(path, repoPrefix) {
	case "", "/admin", "/boltstore", "/etcdstore", "/kube", "/looplabfsm", "/otelfsm", "/prom":
		return true
	}
	return false
}

// withoutOwnSums drops the checksums of this repository's modules: the
// local versions' change with every commit (a go.sum that recorded one
// would refuse the next as tampered with).
func withoutOwnSums(sum []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(sum, []byte("\n")) {
		path, _, _ := bytes.Cut(line, []byte(" "))
		if p := string(path); p == repoPrefix || strings.HasPrefix(p, repoPrefix+"/") {
			continue
		}
		out = append(out, line...)
	}
	return out
}

// loadsAlone checks that every module's packages load with GOWORK=off
// from its go.mod and go.sum as committed (the siblings through its
// replaces), so go doc, go build and go test work in it without the
// workspace; all but the CLI's, which cannot carry replaces (go install
// path@version refuses a module that does), so until the first tag it
// loads only in the workspace.
func loadsAlone(ctx context.Context, mods []mod) error {
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	for _, m := range mods {
		if strings.TrimPrefix(m.path, repoPrefix) == cliPath {
			continue
		}
		if _, err := output(ctx, m.dir, env, "go", "list", "-deps", "-test", "./..."); err != nil {
			return fmt.Errorf("%s does not load on its own go.mod (GOWORK=off): %w", m.path, err)
		}
	}
	return nil
}

// copyWithoutOwnReplaces copies the go.mod from to to, without its
// replaces of this repository's modules.
func copyWithoutOwnReplaces(from, to string) error {
	f, err := readModFile(from)
	if err != nil {
		return err
	}
	for _, r := range slices.Clone(f.Replace) {
		if r.Old.Path == repoPrefix || strings.HasPrefix(r.Old.Path, repoPrefix+"/") {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	return writeModFile(to, f)
}

// readModFile parses the go.mod at path.
func readModFile(path string) (*modfile.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return modfile.Parse(path, data, nil)
}

// writeModFile writes f, tidied, to path.
func writeModFile(path string, f *modfile.File) error {
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// command runs in its own process group, so that stopping testall stops
// everything under it (go test's test binaries, their etcd and
// kube-apiserver children), never leaving an orphan.
func command(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// stream runs a command with its output going straight to ours, so a long
// first build shows its progress as it happens.
func stream(ctx context.Context, dir string, env []string, name string, args ...string) error {
	return runTo(ctx, os.Stdout, os.Stderr, true, dir, env, name, args...)
}

// runTo runs a command with its output going to stdout and stderr, the
// command line first on stderr. When it runs alone (nothing else testall
// started is running, so every child left is an orphan) it kills and
// reaps what the command left behind, and says so; otherwise that is left
// to the caller: a command running beside it may have detached children
// of its own, which are not a leak.
func runTo(ctx context.Context, stdout, stderr io.Writer, alone bool, dir string, env []string, name string, args ...string) error {
	fmt.Fprintf(stderr, "$ %s %s\n", name, strings.Join(args, " "))
	cmd := command(ctx, dir, env, name, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if !alone {
		return err
	}
	if left := killOrphans(); len(left) > 0 {
		fmt.Fprintf(stderr, "testall: %s %s left processes behind, killed: %s\n", name, strings.Join(args, " "), strings.Join(left, ", "))
	}
	return err
}

// output runs a command and returns its standard output; its standard
// error (progress) goes straight to ours.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := command(ctx, dir, env, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	err := cmd.Run()
	return out.String(), err
}

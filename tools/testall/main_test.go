package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestWithoutOwnSumsDropsOnlyThisRepositorysModules(t *testing.T) {
	sum := "github.com/execfsm/execfsm v0.1.0 h1:a=\n" +
		"github.com/execfsm/execfsm/etcdstore v0.1.0/go.mod h1:b=\n" +
		"github.com/execfsm/execfsmother v1.0.0 h1:c=\n" +
		"go.etcd.io/bbolt v1.4.3 h1:d=\n"
	require.Equal(t, "github.com/execfsm/execfsmother v1.0.0 h1:c=\ngo.etcd.io/bbolt v1.4.3 h1:d=\n", string(withoutOwnSums([]byte(sum))))
}

// The module tests get this repository's modules from the proxy, not
// from the sibling directories the go.mod files replace them with.
func TestTheTestedGoModHasNoneOfItsOwnReplaces(t *testing.T) {
	dir := t.TempDir()
	gomod := "module github.com/execfsm/execfsm/kube\n\ngo 1.24\n\n" +
		"require (\n\tgithub.com/execfsm/execfsm v0.1.0\n\texample.com/other v1.0.0\n)\n\n" +
		"replace github.com/execfsm/execfsm => ..\n\nreplace example.com/other => ../other\n"
	from, to := filepath.Join(dir, "go.mod"), filepath.Join(dir, "copy.mod")
	require.NoError(t, os.WriteFile(from, []byte(gomod), 0o644))
	require.NoError(t, copyWithoutOwnReplaces(from, to))
	got, err := os.ReadFile(to)
	require.NoError(t, err)
	require.NotContains(t, string(got), "replace github.com/execfsm/execfsm")
	require.Contains(t, string(got), "replace example.com/other => ../other")
	require.Contains(t, string(got), "github.com/execfsm/execfsm v0.1.0")
}

func TestReleaseVersionIsTheOneEveryModuleRequires(t *testing.T) {
	dir := t.TempDir()
	write := func(name, gomod string) mod {
		d := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "go.mod"), []byte(gomod), 0o644))
		return mod{dir: d}
	}
	root := write("root", "module github.com/execfsm/execfsm\n\ngo 1.23\n")
	a := write("a", "module github.com/execfsm/execfsm/a\n\ngo 1.23\n\nrequire github.com/execfsm/execfsm v0.3.0\n")
	b := write("b", "module github.com/execfsm/execfsm/b\n\ngo 1.23\n\nrequire (\n\tgithub.com/execfsm/execfsm v0.3.0\n\tgithub.com/execfsm/execfsm/a v0.3.0\n)\n")
	v, err := releaseVersion([]mod{root, a, b})
	require.NoError(t, err)
	require.Equal(t, "v0.3.0", v)

	c := write("c", "module github.com/execfsm/execfsm/c\n\ngo 1.23\n\nrequire github.com/execfsm/execfsm v0.2.0\n")
	_, err = releaseVersion([]mod{root, a, b, c})
	require.ErrorContains(t, err, "2 versions")
}

// The Go blocks of the docs are built with the README's: a page that
// opens a store is compiled against the released API like the front page.
func TestMarkedBlocksAreTheReadmesThenTheDocs(t *testing.T) {
	root := t.TempDir()
	block := func(kind, body string) string { return "<!-- go: " + kind + " -->\n```go\n" + body + "```\n" }
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("# x\n"+block("run", "package main\n")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "stores.md"), []byte(block("build", "package stores\n")+"```go\nunmarked\n```\n"), 0o644))
	blocks, err := markedBlocks(root)
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	require.Equal(t, "run", string(blocks[0][1]))
	require.Equal(t, "package stores\n", string(blocks[1][2]))

	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("# nothing marked\n"), 0o644))
	_, err = markedBlocks(root)
	require.ErrorContains(t, err, "README.md has no Go block")
}

// The README's package tables name every public package of the published
// modules, and only those: the layout a reader sees is the tree.
func TestTheReadmesPackageTablesAreTheTree(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Packages\n")
	require.True(t, ok, "the README has a Packages section")
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		// A row names one package or several: "| `a`, `b` | ... |".
		if cell, ok := strings.CutPrefix(line, "| `"); ok {
			cell, _, _ = strings.Cut(cell, " |")
			for _, name := range strings.Split(cell, ", ") {
				listed = append(listed, strings.Trim(name, "`"))
			}
		}
	}

	unpublished := map[string]bool{"bench": true, "examples": true, "reliability": true, "tools": true, "hack": true, "api": true, "docs": true}
	var tree []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if d.IsDir() && (unpublished[top] || d.Name() == "internal" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." && !slices.Contains(tree, dir) {
				tree = append(tree, dir)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.ElementsMatch(t, tree, listed)
}

// Modules are tested side by side, and each one's output comes out whole
// under a header saying how it went.
func TestModulesRunSideBySideAndTheirOutputsDoNotMix(t *testing.T) {
	mods := []mod{{path: "a"}, {path: "b"}, {path: "c"}}
	bothStarted := make(chan struct{}, 2)
	var out bytes.Buffer
	failed, passed := testModules(context.Background(), &out, mods, 2, func(m mod, w io.Writer) error {
		if m.path != "c" {
			// a and b wait for each other: with one lane at a time
			// this would time out.
			bothStarted <- struct{}{}
			deadline := time.After(10 * time.Second)
			for len(bothStarted) < 2 {
				select {
				case <-deadline:
					return errors.New("the other module never started beside this one")
				case <-time.After(time.Millisecond):
				}
			}
		}
		for k := range 3 {
			fmt.Fprintf(w, "%s line %d\n", m.path, k)
			time.Sleep(time.Millisecond)
		}
		if m.path == "b" {
			return errors.New("b failed")
		}
		return nil
	})
	require.Equal(t, []string{"b"}, failed)
	require.ElementsMatch(t, []string{"a", "c"}, slices.Collect(maps.Keys(passed)), "the times of the modules that passed")
	for path, took := range passed {
		require.Positive(t, took, "module %s's time", path)
	}
	text := out.String()
	for _, m := range mods {
		require.Contains(t, text, m.path+" line 0\n"+m.path+" line 1\n"+m.path+" line 2\n", "module %s's output in one piece", m.path)
		require.Contains(t, text, "== "+m.path+", on its own go.mod: started")
	}
	require.Regexp(t, `== b, on its own go\.mod: FAIL after \d+s`, text)
	require.Regexp(t, `== a, on its own go\.mod: ok after \d+s`, text)
	require.Contains(t, text, "testall: b failed")
}

func TestParallelModulesIsANumber(t *testing.T) {
	t.Setenv(parallelEnv, "")
	n, err := parallelModules()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	t.Setenv(parallelEnv, "1")
	n, err = parallelModules()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for _, bad := range []string{"0", "-1", "two"} {
		t.Setenv(parallelEnv, bad)
		_, err = parallelModules()
		require.ErrorContains(t, err, parallelEnv)
	}
}

// The slowest modules of the last run start first; a module not timed
// yet goes before every timed one; the times survive to the next run.
func TestModulesStartSlowestFirstByTheLastRunsTimes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache", "times.json")
	mods := []mod{{path: "root"}, {path: "fast"}, {path: "slow"}, {path: "new"}, {path: "middle"}}
	first := loadDurations(file)
	require.Equal(t, mods, slowestFirst(mods, first), "nothing timed: the workspace's order")
	first.took["root"] = 3 * time.Second
	first.took["fast"] = time.Second
	first.took["slow"] = 9 * time.Second
	first.took["middle"] = 5 * time.Second
	require.NoError(t, first.save())

	next := loadDurations(file)
	var order []string
	for _, m := range slowestFirst(mods, next) {
		order = append(order, m.path)
	}
	require.Equal(t, []string{"new", "slow", "middle", "root", "fast"}, order)

	require.NoError(t, os.WriteFile(file, []byte("not json"), 0o644))
	require.Equal(t, mods, slowestFirst(mods, loadDurations(file)), "an unreadable file: the workspace's order")
	require.Equal(t, mods, slowestFirst(mods, loadDurations("")), "no cache directory: the workspace's order")
	require.NoError(t, loadDurations("").save(), "no cache directory: nothing to keep")
}

// testModules starts a goroutine a lane and two more: none outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

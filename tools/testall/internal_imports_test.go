package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// No module imports another module's internal packages: the modules are
// released apart, and a user's go get that pairs one module's release
// with another's must build whatever those internal packages became.
// (Go allows it by path inside one repository; the API check does not
// see it; this does.) Test files count: a module's tests run against the
// other modules' releases too.
func TestNoModuleImportsAnotherModulesInternalPackages(t *testing.T) {
	root := filepath.Join("..", "..")
	modules := map[string]string{} // module path → directory
	for dir, path := range repoModules(t, root) {
		modules[path] = dir
	}
	// owner is the module an import path belongs to: the longest module
	// path it starts with.
	owner := func(path string) string {
		best := ""
		for mod := range modules {
			if (path == mod || strings.HasPrefix(path, mod+"/")) && len(mod) > len(best) {
				best = mod
			}
		}
		return best
	}
	var crossings []string
	for mod, dir := range modules {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || isModule(path)) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range f.Imports {
				ipath, _ := strconv.Unquote(imp.Path.Value)
				if !strings.Contains(ipath, "/internal/") && !strings.HasSuffix(ipath, "/internal") {
					continue
				}
				if from := owner(ipath); from != "" && from != mod {
					crossings = append(crossings, path+" imports "+ipath+" (of "+from+")")
				}
			}
			return nil
		}))
	}
	sort.Strings(crossings)
	require.Empty(t, crossings, "imports of another module's internal packages")
	require.Greater(t, len(modules), 5, "the repository's modules were found")
}

// repoModules are the repository's modules under root: each directory
// holding a go.mod, with the module path it declares.
func repoModules(t *testing.T, root string) map[string]string {
	t.Helper()
	modules := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); dir != root && (name == "testdata" || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			line, _, _ := strings.Cut(string(mod), "\n")
			modules[dir] = strings.TrimSpace(strings.TrimPrefix(line, "module"))
		}
		return nil
	}))
	return modules
}

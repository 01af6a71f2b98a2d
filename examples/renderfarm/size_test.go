package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// libraryPrefix is the import path of every package of the library.
const libraryPrefix = "github.com/execfsm/execfsm/"

// The controller (its table and roles, store, start, run, SIGTERM, finish,
// the Loop over the spool, metrics) fits on one screen: the lines of
// controller.go and farm.go that name anything of the library, and the
// distinct names they use, are counted by the type checker.
func TestTheControllerFitsOnOneScreen(t *testing.T) {
	lines, names := libraryUse(t, "controller.go", "farm.go")
	t.Logf("%d lines name %d identifiers of the library: %s", len(lines), len(names), strings.Join(names, " "))
	require.LessOrEqual(t, len(lines), 60, "lines touching the library")
	// The bound on the distinct names (30) is not met yet: 49
	// (docs/decisions/2026-12-07-one-screen.md says where they go). This
	// bound keeps them from growing while the API shrinks toward it.
	require.LessOrEqual(t, len(names), 49, "distinct library identifiers")
}

// libraryUse type-checks the package and returns the lines of files that
// use an identifier of the library, and those identifiers (a method or a
// field named with its type).
func libraryUse(t *testing.T, files ...string) (lines []string, names []string) {
	t.Helper()
	fset := token.NewFileSet()
	sources, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var parsed []*ast.File
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		parsed = append(parsed, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", exportData(t))}
	_, err = conf.Check("renderfarm", fset, parsed, info)
	require.NoError(t, err)
	counted := map[string]bool{}
	for _, f := range files {
		counted[f] = true
	}
	lineSet, nameSet := map[string]bool{}, map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path(), libraryPrefix) {
			continue
		}
		pos := fset.Position(id.Pos())
		if !counted[pos.Filename] {
			continue
		}
		lineSet[fmt.Sprintf("%s:%d", pos.Filename, pos.Line)] = true
		nameSet[qualified(obj)] = true
	}
	for l := range lineSet {
		lines = append(lines, l)
	}
	for n := range nameSet {
		names = append(names, n)
	}
	sort.Strings(lines)
	sort.Strings(names)
	return lines, names
}

// exportData finds the compiled export data of this package's
// dependencies, as go build left it in the build cache.
func exportData(t *testing.T) func(path string) (io.ReadCloser, error) {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	require.NoError(t, err)
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "=")
		files[path] = file
	}
	return func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
}

// qualified names obj as a reader counts it: a package-level name with
// its package, a method with its receiver's type, a field with its
// package (the same field name of two structs of one package counts once).
func qualified(obj types.Object) string {
	pkg := obj.Pkg().Name()
	if fn, ok := obj.(*types.Func); ok {
		if recv := fn.Signature().Recv(); recv != nil {
			typ := recv.Type()
			if p, ok := typ.(*types.Pointer); ok {
				typ = p.Elem()
			}
			if named, ok := typ.(*types.Named); ok {
				return pkg + "." + named.Obj().Name() + "." + obj.Name()
			}
		}
	}
	if v, ok := obj.(*types.Var); ok && v.IsField() {
		return pkg + ".field " + obj.Name()
	}
	return pkg + "." + obj.Name()
}

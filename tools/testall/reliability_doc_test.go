package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// reliabilityRow is one guarantee of RELIABILITY.md: the tests it cites
// and the commands that run them, as the raw file has them.
type reliabilityRow struct {
	line     int
	tests    []string // the backticked words of the tests column
	commands []string // the backticked commands of the command column
}

// reliabilityRows reads the guarantees' tables of RELIABILITY.md.
func reliabilityRows(t *testing.T, root string) []reliabilityRow {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, "RELIABILITY.md"))
	require.NoError(t, err)
	cellSplit := regexp.MustCompile(`[^\\]\|`)
	backticked := regexp.MustCompile("`([^`]+)`")
	var rows []reliabilityRow
	for k, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| guarantee") {
			continue
		}
		cells := cellSplit.Split(" "+strings.TrimSpace(line), -1)
		require.GreaterOrEqual(t, len(cells), 4, "RELIABILITY.md:%d has three columns: guarantee, tests, command", k+1)
		row := reliabilityRow{line: k + 1}
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			row.tests = append(row.tests, m[1])
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[3], -1) {
			row.commands = append(row.commands, m[1])
		}
		rows = append(rows, row)
	}
	require.NotEmpty(t, rows, "RELIABILITY.md has its tables")
	return rows
}

// Every test RELIABILITY.md cites is one: a test function, a suite's
// test (named in its table), or, with a *, a pattern some test matches.
// Package names and file paths beside them are left alone.
func TestEveryTestReliabilityCitesExists(t *testing.T) {
	root := filepath.Join("..", "..")
	names := testNames(t, root)
	testName := regexp.MustCompile(`^[A-Z][A-Za-z0-9_*]*$`)
	for _, row := range reliabilityRows(t, root) {
		for _, cited := range row.tests {
			if i := strings.LastIndex(cited, "."); i >= 0 && !strings.Contains(cited, "/") {
				cited = cited[i+1:] // recoverytest.WriteHeldInAGuard
			}
			if !testName.MatchString(cited) {
				continue // a package, a path, an environment variable
			}
			found := slices.ContainsFunc(names, func(n string) bool { ok, _ := path.Match(cited, n); return ok })
			require.True(t, found, "RELIABILITY.md:%d cites %s, which no test of the repository is", row.line, cited)
		}
	}
}

// testNames are the names of the repository's functions and of the
// words its Go files quote (a suite names its tests in a table).
func testNames(t *testing.T, root string) []string {
	t.Helper()
	quoted := regexp.MustCompile(`"([A-Z][A-Za-z0-9_]+)"`)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok {
				seen[fn.Name.Name] = true
			}
		}
		for _, m := range quoted.FindAllSubmatch(src, -1) {
			seen[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	return names
}

// Every command RELIABILITY.md gives runs at least one test, as it is
// written in the raw file (a `\|` there is a literal bar to go test, and
// runs nothing): each go test of it, in the directory it names, has a
// test, fuzz target or example its -run (or -fuzz) pattern matches,
// among the test files go test would build there, and sets only flags
// its package's tests define.
func TestEveryReliabilityCommandRunsATest(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, row := range reliabilityRows(t, root) {
		for _, command := range row.commands {
			tests, ok := goTests(command)
			if !ok {
				continue // go run ./tools/testall, a template (NAME), .ci/run
			}
			for _, test := range tests {
				checkGoTest(t, root, fmt.Sprintf("RELIABILITY.md:%d", row.line), command, test)
			}
		}
	}
}

// checkGoTest checks one go test of a command a page gives (where says
// which): it runs at least one test as written, and every flag of its own
// it sets is one its package's tests define.
func checkGoTest(t *testing.T, root, where, command string, test goTest) {
	t.Helper()
	names := testFuncs(t, filepath.Join(root, test.dir), test.packages, test.tags)
	top, _, _ := strings.Cut(test.pattern, "/")
	match, err := regexp.Compile(top)
	require.NoError(t, err, "%s: %s", where, command)
	require.True(t, slices.ContainsFunc(names, match.MatchString),
		"%s: `%s` runs no test (-run %q matches none of %d in %v)", where, command, test.pattern, len(names), test.packages)
	for _, flag := range test.flags {
		require.True(t, definesFlag(t, filepath.Join(root, test.dir), test.packages, flag),
			"%s: `%s` sets -%s, which the tests of %v do not define", where, command, flag, test.packages)
	}
}

// goTest is one go test of a command: where it runs, what, what it
// selects, and the flags of its own test files it sets.
type goTest struct {
	dir      string
	packages []string
	tags     []string
	pattern  string
	flags    []string
}

// goTestFlags are go test's own flags, with whether each takes a value.
var goTestFlags = map[string]bool{"-race": false, "-count": true, "-timeout": true, "-v": false, "-short": false,
	"-bench": true, "-benchmem": false, "-benchtime": true, "-fuzztime": true, "-cpu": true, "-failfast": false,
	"-list": true, "-cover": false, "-json": false, "-p": true, "-parallel": true, "-shuffle": true}

// goTests reads a command of RELIABILITY.md: `go test ...`, several
// joined by &&, or `(cd DIR && ...)`. ok is false for anything else.
func goTests(command string) (tests []goTest, ok bool) {
	dir := "."
	if inner, found := strings.CutPrefix(command, "(cd "); found {
		inner = strings.TrimSuffix(inner, ")")
		d, rest, found := strings.Cut(inner, " && ")
		if !found {
			return nil, false
		}
		dir, command = d, rest
	}
	if strings.Contains(command, "NAME") {
		return nil, false
	}
	for _, part := range strings.Split(command, " && ") {
		args := strings.Fields(strings.ReplaceAll(part, "'", ""))
		if len(args) < 2 || args[0] != "go" || args[1] != "test" {
			return nil, false
		}
		test := goTest{dir: dir, pattern: "."}
		for k := 2; k < len(args); k++ {
			switch arg := args[k]; {
			case arg == "-run" && k+1 < len(args):
				k++
				if args[k] != "^$" {
					test.pattern = args[k]
				}
			case arg == "-fuzz" && k+1 < len(args):
				k++
				test.pattern = args[k]
			case arg == "-tags" && k+1 < len(args):
				k++
				test.tags = strings.Split(args[k], ",")
			case strings.HasPrefix(arg, "-"):
				name, _, hasValue := strings.Cut(arg, "=")
				takesValue, known := goTestFlags[name]
				if !known {
					test.flags = append(test.flags, strings.TrimLeft(name, "-"))
				} else if takesValue && !hasValue {
					k++
				}
			default:
				test.packages = append(test.packages, arg)
			}
		}
		if len(test.packages) == 0 {
			test.packages = []string{"."}
		}
		tests = append(tests, test)
	}
	return tests, true
}

// testFuncs are the top-level tests, fuzz targets and examples of the
// packages (./... included) under dir, from the test files go test builds
// with tags.
func testFuncs(t *testing.T, dir string, packages, tags []string) []string {
	t.Helper()
	ctx := build.Default
	ctx.BuildTags = tags
	var dirs []string
	for _, p := range packages {
		base, recursive := strings.CutSuffix(p, "/...")
		base = filepath.Join(dir, base)
		if !recursive {
			dirs = append(dirs, base)
			continue
		}
		require.NoError(t, filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if p != base && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if p != base && isModule(p) {
				return filepath.SkipDir // a module of its own
			}
			dirs = append(dirs, p)
			return nil
		}))
	}
	var names []string
	for _, d := range dirs {
		pkg, err := ctx.ImportDir(d, 0)
		if err != nil {
			continue // no Go files here
		}
		for _, file := range append(slices.Clone(pkg.TestGoFiles), pkg.XTestGoFiles...) {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(d, file), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Recv != nil {
					continue
				}
				for _, prefix := range []string{"Test", "Fuzz", "Example"} {
					if strings.HasPrefix(fn.Name.Name, prefix) && fn.Name.Name != "TestMain" {
						names = append(names, fn.Name.Name)
					}
				}
			}
		}
	}
	return names
}

func TestGoTestsReadsTheCommandsAsGoTestWould(t *testing.T) {
	tests, ok := goTests("(cd admin && go test -run Authorizer && go test -run WithoutAn)")
	require.True(t, ok)
	require.Equal(t, []goTest{{dir: "admin", packages: []string{"."}, pattern: "Authorizer"}, {dir: "admin", packages: []string{"."}, pattern: "WithoutAn"}}, tests)
	tests, ok = goTests("go test -race ./boltstore ./internal/watchlog -run 'Watch\\|Follow'")
	require.True(t, ok)
	require.Equal(t, []goTest{{dir: ".", packages: []string{"./boltstore", "./internal/watchlog"}, pattern: "Watch\\|Follow"}}, tests)
	tests, ok = goTests("(cd admin && go test -run '^$' -fuzz FuzzDecodeLine)")
	require.True(t, ok)
	require.Equal(t, "FuzzDecodeLine", tests[0].pattern)
	_, ok = goTests("go run ./tools/testall")
	require.False(t, ok)
	_, ok = goTests("go test -tags reintroduced_NAME -run TestReintroduced ./recovery/fleettest")
	require.False(t, ok)
}

// goTestCommand finds a go test command in prose: in a code span or an
// HTML comment of a page.
var goTestCommand = regexp.MustCompile("(?:`|<!-- [^;>]*?; )((?:\\(cd [^`&]+ && )?go test [^`>]*?)(?: -->|`)")

// Every go test command the README and docs/ give (the decision records
// are history, left as they were; RELIABILITY.md's are checked row by
// row) runs at least one test as written, and
// every flag of its own it sets is one its package's tests define: a
// page that says "go test ./state -update-docs" after the flag moved is
// caught here.
func TestEveryDocsGoTestCommandRuns(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	for page, text := range pageTexts(t, root) {
		if filepath.Base(page) == "RELIABILITY.md" {
			continue // its table's commands are checked row by row, above
		}
		for _, m := range goTestCommand.FindAllStringSubmatch(text, -1) {
			command := strings.TrimSuffix(strings.TrimSpace(m[1]), ")")
			if strings.HasPrefix(m[1], "(cd ") {
				command = m[1]
			}
			tests, ok := goTests(command)
			if !ok || strings.Contains(command, "-bench") {
				continue
			}
			for _, test := range tests {
				checkGoTest(t, root, filepath.Base(page), command, test)
				checked++
			}
		}
	}
	require.Greater(t, checked, 2, "the pages' commands were found")
}

// definesFlag reports whether the test files of the packages under dir
// define the flag name (flag.Bool("name", ...) and its kind).
func definesFlag(t *testing.T, dir string, packages []string, name string) bool {
	t.Helper()
	defines := regexp.MustCompile(`flag\.[A-Z][a-z]+(?:Var)?\([^"]*"` + regexp.QuoteMeta(name) + `"`)
	for _, p := range packages {
		files, err := filepath.Glob(filepath.Join(dir, strings.TrimSuffix(p, "/..."), "*_test.go"))
		require.NoError(t, err)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			if defines.Match(src) {
				return true
			}
		}
	}
	return false
}

// Every decision record says near its top whether it stands: a reader
// of an old record learns from it, not from the next ones, that a later
// record superseded it.
func TestEveryDecisionRecordSaysItsStatus(t *testing.T) {
	records, err := filepath.Glob(filepath.Join("..", "..", "docs", "decisions", "2*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, records)
	status := regexp.MustCompile(`(?m)^(?:Date: [^\n]*)?Status: |\. Status: `)
	for _, record := range records {
		text, err := os.ReadFile(record)
		require.NoError(t, err)
		lines := strings.SplitN(string(text), "\n", 9)
		head := strings.Join(lines[:min(len(lines), 8)], "\n")
		require.Regexp(t, status, head, "%s says in its first lines whether it stands (Status: ...)", filepath.Base(record))
	}
}

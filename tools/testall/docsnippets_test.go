package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Go in a doc comment is never compiled, and it drifts: a constructor
// shown without the error it returns, a field renamed. Every doc example
// is an Example function, which go vet and go test compile (and run,
// where it has output), or a README or docs/ block that testall builds.
// A doc comment may still hold tables, diagrams and shell lines.
func TestNoGoCodeInDocComments(t *testing.T) {
	root := filepath.Join("..", "..")
	unpublished := map[string]bool{"bench": true, "examples": true, "reliability": true, "tools": true, "hack": true, "api": true, "docs": true}
	var found []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if d.IsDir() && rel != "." && (unpublished[top] || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, group := range file.Comments {
			for _, block := range codeBlocks(group) {
				if isGo(block.text) {
					found = append(found, fset.Position(block.pos).String())
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "Go code in doc comments: make each an Example function (see TestNoGoCodeInDocComments)")
}

type codeBlock struct {
	pos  token.Pos
	text string
}

// codeBlocks returns the indented blocks of a comment group, as godoc
// shows them as code.
func codeBlocks(group *ast.CommentGroup) []codeBlock {
	var blocks []codeBlock
	var cur []string
	var start token.Pos
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, codeBlock{start, strings.Join(cur, "\n")})
			cur = nil
		}
	}
	for _, c := range group.List {
		line, ok := strings.CutPrefix(c.Text, "//")
		if !ok || !strings.HasPrefix(line, "\t") {
			flush()
			continue
		}
		if len(cur) == 0 {
			start = c.Pos()
		}
		cur = append(cur, line)
	}
	flush()
	return blocks
}

// isGo reports whether text parses as Go declarations or statements.
func isGo(text string) bool {
	if _, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+text, 0); err == nil {
		return true
	}
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+text+"\n}", 0)
	return err == nil
}

func TestIsGoTellsCodeFromTablesAndShell(t *testing.T) {
	require.True(t, isGo("\tt, err := prom.NewTransitions(m, table)"))
	require.True(t, isGo("\tfunc TestX(t *testing.T) {\n\t\tRun(t)\n\t}"))
	require.False(t, isGo("\tpending → scheduling → initializing"))
	require.False(t, isGo("\tgo get github.com/execfsm/execfsm/kube"))
	require.False(t, isGo("\tstored status  start             SIGTERM"))
	require.False(t, isGo("\tlength uint32, little-endian: of the payload"))
}

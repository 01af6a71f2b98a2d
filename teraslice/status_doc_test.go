package teraslice_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// Every status's doc comment ends with a "Moves to:" line, and that line
// is what the lifecycle table allows: the prose cannot drift from the
// table unnoticed (it had: Scheduling's left out Stopping, Stopping's
// Failed and Terminated).
func TestStatusDocsSayWhereTheTableGoes(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "../state/status.go", nil, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		if spec, ok := n.(*ast.ValueSpec); ok && spec.Doc != nil {
			for _, name := range spec.Names {
				docs[name.Name] = spec.Doc.Text()
			}
		}
		return true
	})
	table := teraslice.Lifecycle()
	for s := range state.All.All() {
		name := strings.ToUpper(s.String()[:1]) + s.String()[1:]
		doc, ok := docs[name]
		require.True(t, ok, "status %s has no doc comment", name)
		_, line, found := strings.Cut(doc, "Moves to: ")
		require.True(t, found, "the doc of %s has no \"Moves to:\" line", name)
		line, _, _ = strings.Cut(line, ".")
		line, _, _ = strings.Cut(line, " (") // a remark after the list
		var said []string
		if line != "nothing" {
			for _, field := range strings.Split(strings.ReplaceAll(line, "\n", " "), ",") {
				word, _, _ := strings.Cut(strings.TrimSpace(field), " ")
				said = append(said, word)
			}
		}
		var allowed []string
		for _, next := range table.Next(s) {
			allowed = append(allowed, next.String())
		}
		slices.Sort(said)
		slices.Sort(allowed)
		require.Equal(t, allowed, said, "the doc of %s says it moves to %v; the table allows %v", name, said, allowed)
	}
}

package state_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vocabulary is at the bottom: decoding a status compiles nothing of
// the tables, the decisions or the reconcile runtime, and nothing outside
// the standard library.
func TestTheVocabularyDependsOnTheStandardLibraryAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/execfsm/execfsm/state" {
			require.True(t, strings.HasPrefix(dep, "github.com/execfsm/execfsm/internal/") || dep == "github.com/execfsm/execfsm/storage/storekit/quote",
				"state depends on %s: the vocabulary takes nothing but the standard library and the module's small helpers (internal/, storekit/quote)", dep)
		}
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/execfsm/execfsm/examples/internal/proctest"
	"github.com/stretchr/testify/require"
)

// The test binary is also the operators.
func TestMain(m *testing.M) { proctest.Main(m, child) }

// Every scenario passes against the real API server and Job controller:
// the drain relocates, the OOM kills restart then fail, the stop stops,
// and the operator outlives an API server restart and hands over.
func TestTheOperatorKeepsEveryPhaseRight(t *testing.T) {
	var out strings.Builder
	code := supervise(nil, &out)
	t.Log(out.String())
	require.Equal(t, 0, code)
	require.NotContains(t, out.String(), "FAIL")
	for _, s := range []string{"drain", "oom", "stop", "restart"} {
		require.Contains(t, out.String(), "PASS "+s)
	}
	require.Contains(t, out.String(), "operator-a exited: exit 0")
}

package kube_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A controller that chose the ConfigMap store to avoid running an etcd
// does not compile controller-runtime or Prometheus with it: those come
// only with kube/ctrlruntime.
func TestTheStoreCompilesNeitherControllerRuntimeNorPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.NotContains(t, dep, "sigs.k8s.io/controller-runtime")
		require.NotContains(t, dep, "prometheus")
	}
}

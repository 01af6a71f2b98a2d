package recoverytest

import (
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// ResumesAfterRestore is a controller started over execution id of a
// store restored from a backup (a running execution whose controller
// was lost with the old store): it takes the execution over and resumes
// it, as after any restart, and lets it go.
func ResumesAfterRestore(t *testing.T, store storage.Store, id string) {
	t.Helper()
	v, exec, err := startup(t, store, id, "pod-restored", lease("pod-restored"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision, "a running execution whose controller was lost resumes: %s", v.Reason)
	require.NoError(t, exec.Ownership().Release(bounded(t)))
}

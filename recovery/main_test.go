package recovery_test

import (
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The reaper's loop test and the stores' ownerships start goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// decider is the Decider of roles and p, for a test.
func decider[S comparable](t testing.TB, roles *recovery.Roles[S], p recovery.Policy) *recovery.Decider[S] {
	t.Helper()
	d, err := recovery.NewDecider(roles, p)
	require.NoError(t, err)
	return d
}

package recovery_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The reaper's loop test and the stores' ownerships start goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package recoverytest_test

import (
	"testing"

	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/storage"
)

// A store's tests run the ownership suite beside storagetest's. In a
// _test.go file, the function below is a test of its own:
// func TestStartupOwnership(t *testing.T).
func ExampleRunOwnership() {
	ownership := func(t *testing.T) {
		recoverytest.RunOwnership(t, func(t *testing.T) storage.Store {
			return storage.NewMemory() // open your store here
		}, recoverytest.Options{})
	}
	_ = ownership
}

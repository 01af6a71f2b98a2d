package storagetest_test

import (
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
)

// A store's tests run the suite on a fresh, empty store for each case.
// In a _test.go file, the function below is a test of its own:
// func TestConformance(t *testing.T).
func ExampleRun() {
	conformance := func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Store {
			return storage.NewMemory() // open your store here
		})
	}
	_ = conformance
}

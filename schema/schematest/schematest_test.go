package schematest_test

import (
	"testing"

	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/storage"
)

func TestMemory(t *testing.T) {
	schematest.Run(t, func(*testing.T) storage.Store { return storage.NewMemory() })
}

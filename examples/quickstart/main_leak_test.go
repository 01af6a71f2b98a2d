package main

import (
	"testing"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/proctest"
)

// The etcd run starts an embedded etcd; the harness ignores its idling
// goroutines. The quickstart has no child processes.
func TestMain(m *testing.M) {
	proctest.Main(m, func(proc.Spec) int { return 1 })
}

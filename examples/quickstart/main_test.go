package main

import (
	"context"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/stretchr/testify/require"
)

func TestQuickstartWalksStartRelocationAndCompletionOnEveryStore(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "etcd"} {
		t.Run(kind, func(t *testing.T) { quickstart(t, kind) })
	}
}

func quickstart(t *testing.T, kind string) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), &out, stores.Flags{Kind: kind}))
	got := out.String()
	for _, want := range []string{
		"relocating   running  → initializing ←running ←recovering ←failing ←paused",
		"pod-a@1    initializing   (owner)      controller started for initializing execution",
		"pod-a startup: start",
		"pod-a@1    initializing → running",
		"pod-b startup refused:",
		"record is owned by a live holder: held by \"pod-a\"",
		"pod-a@1    paused       → relocating",
		"pod-a SIGTERM: relocate, exit 143",
		"pod-b startup: resume → paused",
		"pod-b@2    relocating   → paused",
		"pod-a refused:",
		"writer fenced: claim \"pod-a\"@1: the ownership has ended",
		"pod-b@2    running      → completed    the work finished",
		"pod-b finished: running → completed (the work finished)",
		"Final record: completed, owner pod-b at epoch 2",
	} {
		require.Contains(t, got, want)
	}
}

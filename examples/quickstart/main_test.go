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
		"paused       → relocating",
		"relocating   → paused       resumed where it was relocated from",
		"pod-a refused:",
		"writer fenced by a newer owner",
		"→ completed    all slices processed",
		"Final record: completed, owner pod-b at epoch 2",
	} {
		require.Contains(t, got, want)
	}
}

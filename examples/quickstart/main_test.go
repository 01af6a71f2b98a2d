package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuickstartWalksStartRelocationAndCompletion(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), &out))
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

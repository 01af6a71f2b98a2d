package heldunder

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestASetEndsWhatItKeepsOnceAndKeepsNothingAfter(t *testing.T) {
	var s Set
	ended := map[string]int{}
	end := func(name string) func() { return func() { ended[name]++ } }
	require.True(t, s.Add("a", end("a")))
	require.True(t, s.Add("b", end("b")))
	s.Remove("b")
	s.End()
	s.End()
	require.Equal(t, map[string]int{"a": 1}, ended)
	require.False(t, s.Add("c", end("c")), "an ended set keeps nothing")
	require.Equal(t, map[string]int{"a": 1}, ended)
}

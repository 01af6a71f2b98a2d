package backoff

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestDelayDoublesUpToMax(t *testing.T) {
	d := Doubling{Base: 100 * time.Millisecond, Max: time.Second}
	var got []time.Duration
	for n := range 6 {
		got = append(got, d.Delay(n))
	}
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}, got)
}

// A shift past the top of int64 wraps round; it once came back as a
// wait just under Max, after Max (found by the property below).
func TestDelayDoesNotWrapRound(t *testing.T) {
	d := Doubling{Base: 8388609, Max: 2199023255553}
	for n := 38; n < 70; n++ {
		require.Equal(t, d.Max, d.Delay(n), "retry %d", n)
	}
}

// Delay never overflows into a short or negative wait, however many
// failures: it rises to Max and stays there.
func TestDelayIsMonotoneAndBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := Doubling{Base: time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "base"))}
		d.Max = d.Base + time.Duration(rapid.Int64Range(0, math.MaxInt64-int64(d.Base)).Draw(t, "above base"))
		n := rapid.IntRange(-3, 10_000).Draw(t, "n")
		wait, next := d.Delay(n), d.Delay(n+1)
		require.Positive(t, wait)
		require.LessOrEqual(t, wait, d.Max)
		if n >= 0 {
			require.GreaterOrEqual(t, next, wait)
		}
	})
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	require.False(t, Doubling{Base: time.Hour, Max: time.Hour}.Sleep(ctx, 0))
	require.Less(t, time.Since(start), time.Minute, "a done context ends the wait at once")
	require.True(t, Doubling{Base: time.Millisecond, Max: time.Millisecond}.Sleep(context.Background(), 3))
}

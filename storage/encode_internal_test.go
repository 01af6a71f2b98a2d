package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// appendUTC writes what Time.AppendFormat with RFC3339Nano writes, for a
// run of times that stay on a day, step to the next or jump (the memo of
// the last day must never serve another), and refuses the years that
// format does not write in four digits.
func TestAppendUTCIsAppendFormat(t *testing.T) {
	first := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	rapid.Check(t, func(t *rapid.T) {
		var day utcDay
		sec := rapid.Int64Range(first-2*86400, last+2*86400).Draw(t, "sec")
		for i := range rapid.IntRange(1, 20).Draw(t, "times") {
			switch rapid.IntRange(0, 3).Draw(t, "step") {
			case 0: // within the day, or just past it
				sec += rapid.Int64Range(0, 3600).Draw(t, "seconds")
			case 1: // across midnight
				sec += 86400 - sec%86400 + rapid.Int64Range(-1, 1).Draw(t, "around")
			case 2: // a day, month or year away
				sec += rapid.SampledFrom([]int64{86400, -86400, 31 * 86400, 365 * 86400, -366 * 86400}).Draw(t, "days")
			default:
				sec = rapid.Int64Range(first-2*86400, last+2*86400).Draw(t, "jump")
			}
			nsec := rapid.SampledFrom([]int32{0, 1, 10, 500_000_000, 123_456_789, 999_999_999, 120_000}).Draw(t, "nsec")
			want := time.Unix(sec, int64(nsec)).UTC()
			got, ok := appendUTC([]byte("x"), sec, nsec, &day)
			if want.Year() < 0 || want.Year() > 9999 {
				require.False(t, ok, "time %d: %s", i, want)
				require.Equal(t, "x", string(got), "time %d: appended to a refused time", i)
				continue
			}
			require.True(t, ok, "time %d: %s", i, want)
			require.Equal(t, want.AppendFormat([]byte("x"), time.RFC3339Nano), got, "time %d", i)
		}
	})
}

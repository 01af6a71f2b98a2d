package recovery

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// MetaRestarts is the record metadata key holding the times of recent
// unexpected restarts (failovers), as comma-separated Unix milliseconds,
// oldest first, after "N:" when N earlier ones were dropped to keep the
// value bounded (the last 100 are kept). It is written in the same atomic
// write as the decision that counts the restart, so two controllers
// cannot both spend one slot.
const MetaRestarts = "execfsm.restarts"

// MetaFailure is the record metadata key under which a Fail decision
// leaves its reason, where it survives later metadata-only writes.
const MetaFailure = "execfsm.failure"

// RestartTimes returns the unexpected restarts rec records under
// [MetaRestarts], oldest first (the last 100 of them), and how many
// earlier ones were dropped: what a CLI or a dashboard shows instead of
// the raw milliseconds. A value that is not such a list is an error.
func RestartTimes(rec storage.Record) (times []time.Time, dropped int, err error) {
	r, err := parseRestarts(rec.Meta[MetaRestarts])
	return r.times, r.dropped, err
}

// restarts are the failovers a record counts: the times kept, and how
// many earlier ones were dropped.
type restarts struct {
	times   []time.Time
	dropped int
}

func parseRestarts(value string) (restarts, error) {
	var r restarts
	if value == "" {
		return r, nil
	}
	bad := func() (restarts, error) {
		return restarts{}, fmt.Errorf("metadata %s=%.64q is not a list of Unix milliseconds", MetaRestarts, value)
	}
	if n, rest, ok := strings.Cut(value, ":"); ok {
		dropped, err := strconv.Atoi(n)
		if err != nil || dropped < 0 {
			return bad()
		}
		r.dropped, value = dropped, rest
	}
	for _, field := range strings.Split(value, ",") {
		ms, err := strconv.ParseInt(field, 10, 64)
		if err != nil || ms < 0 {
			return bad()
		}
		r.times = append(r.times, time.UnixMilli(ms))
	}
	return r, nil
}

// since counts the restarts after cutoff: those kept after it, and the
// dropped ones too when cutoff is zero (the whole life counts).
func (r restarts) since(cutoff time.Time) int {
	n := 0
	if cutoff.IsZero() {
		n = r.dropped
	}
	for _, t := range r.times {
		if t.After(cutoff) {
			n++
		}
	}
	return n
}

// add counts one more restart at t, dropping those at or before cutoff
// (out of the window: they count for nothing any more) and the oldest
// kept past maxKeptRestarts.
func (r restarts) add(t, cutoff time.Time) restarts {
	if !cutoff.IsZero() {
		r.times = slices.DeleteFunc(slices.Clone(r.times), func(at time.Time) bool { return !at.After(cutoff) })
		r.dropped = 0
	}
	r.times = append(slices.Clone(r.times), t)
	if over := len(r.times) - maxKeptRestarts; over > 0 {
		r.times, r.dropped = r.times[over:], r.dropped+over
	}
	return r
}

func (r restarts) String() string {
	parts := make([]string, len(r.times))
	for k, t := range r.times {
		parts[k] = strconv.FormatInt(t.UnixMilli(), 10)
	}
	out := strings.Join(parts, ",")
	if r.dropped > 0 {
		out = strconv.Itoa(r.dropped) + ":" + out
	}
	return out
}

package recovery

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"
)

// MetaRestarts is the record metadata key holding the times of recent
// unexpected restarts, as comma-separated Unix milliseconds, oldest
// first. It is written in the same atomic write as the decision that
// counts the restart, so two controllers cannot both spend one slot.
const MetaRestarts = "execfsm.restarts"

// MetaFailure is the record metadata key under which a Fail decision
// leaves its reason, where it survives later metadata-only writes.
const MetaFailure = "execfsm.failure"

// RestartTimes returns the unexpected restarts rec records under
// [MetaRestarts], oldest first: what a CLI or a dashboard shows instead
// of the raw milliseconds. A value that is not such a list is an error.
func RestartTimes(rec storage.Record) ([]time.Time, error) {
	return restartsSince(rec.Meta[MetaRestarts], time.Time{})
}

// restartsSince parses the restart times and keeps those after cutoff.
func restartsSince(value string, cutoff time.Time) ([]time.Time, error) {
	if value == "" {
		return nil, nil
	}
	var kept []time.Time
	for _, field := range strings.Split(value, ",") {
		ms, err := strconv.ParseInt(field, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("metadata %s=%.64q is not a list of Unix milliseconds", MetaRestarts, value)
		}
		if t := time.UnixMilli(ms); t.After(cutoff) {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

func formatRestarts(times []time.Time) string {
	parts := make([]string, len(times))
	for k, t := range times {
		parts[k] = strconv.FormatInt(t.UnixMilli(), 10)
	}
	return strings.Join(parts, ",")
}

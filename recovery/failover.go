package recovery

import (
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// MetaFailovers is the record metadata key holding the unexpected
// restarts of a controller (failovers) the record counts, as a
// [transition.Count] stores them. It is written in the same atomic write
// as the decision that counts the failover, so two controllers cannot
// both spend one. Failovers are a budget of their own ([Policy].Failovers),
// apart from any budget the work's own moves spend.
const MetaFailovers = "execfsm.failovers"

// MetaFailure is the record metadata key under which a Fail decision
// leaves its reason, where it survives later metadata-only writes.
const MetaFailure = "execfsm.failure"

// FailoverCount returns the failovers rec counts (see [MetaFailovers]):
// what a CLI or a dashboard shows instead of the raw milliseconds. A value
// that is not a count is an error matching storage.ErrInvalidRecord.
func FailoverCount(rec storage.Record) (transition.Count, error) {
	c, err := transition.ParseCount(rec.Meta[MetaFailovers])
	if err != nil {
		return c, fmt.Errorf("recovery: metadata %s: %w", MetaFailovers, err)
	}
	return c, nil
}

// CountText says a count the library keeps in a record's metadata as
// people read it, each time written by when: the failovers
// ([MetaFailovers]) and every counter's (transition.CountKey). It
// reports false for any other key, and for a value that is not a count
// (then show it as it is).
func CountText(key, value string, when func(time.Time) string) (string, bool) {
	nouns := "unexpected restarts"
	if counter, ok := transition.CounterOfKey(key); ok {
		nouns = counter + " moves counted"
	} else if key != MetaFailovers {
		return "", false
	}
	c, err := transition.ParseCount(value)
	if err != nil {
		return "", false
	}
	return c.Text(nouns, when), true
}

package transition

import (
	"maps"
	"slices"
)

// Update is what one atomic write does to a record. The zero value is not
// meaningful: To must be set, to the current state for a write that
// changes no state. [To] makes one without naming S, and its methods add
// the rest: transition.To(state.Running).Because("placed").Set("node", n).
type Update[S comparable] struct {
	To     S      // the state to move to
	Reason string // why; kept as the record's Reason and in its audit entry
	// Meta entries are set on the record, Unset keys removed from it, in
	// the same write as the move.
	Meta  map[string]string
	Unset []string
}

// To is the update that moves to state to, S inferred from it.
func To[S comparable](to S) Update[S] { return Update[S]{To: to} }

// Because returns u with its reason.
func (u Update[S]) Because(reason string) Update[S] {
	u.Reason = reason
	return u
}

// Set returns u setting the metadata entry key to value as well. u's
// own map is left as it was: an update built from another does not
// change it.
func (u Update[S]) Set(key, value string) Update[S] {
	meta := make(map[string]string, len(u.Meta)+1)
	maps.Copy(meta, u.Meta)
	meta[key] = value
	u.Meta = meta
	return u
}

// Remove returns u removing the metadata entries keys as well (its
// Unset field).
func (u Update[S]) Remove(keys ...string) Update[S] {
	u.Unset = append(slices.Clip(u.Unset), keys...)
	return u
}

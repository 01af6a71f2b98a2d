package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sync"
)

// Trail is a record's audit trail: its most recent changes, oldest first,
// each at a higher revision than the one before. A Trail is immutable
// and checked when it is made ([NewTrail], [Trail.Append], decoding), so
// every Trail is valid: records share their trails instead of copying
// them, and a store checks the trail of a write in constant time. Its
// zero value is the empty trail.
//
// The immutability is what makes a persisted transition cost a copy of
// one trail instead of five and one check of its newest entry instead of
// two of every entry (docs/decisions/2026-12-03-trail.md). Trails compare
// equal with reflect.DeepEqual (and testify's Equal) when their entries
// do.
type Trail struct {
	entries []Entry // never modified after the Trail is made; nil when empty
}

// NewTrail returns the trail of entries, oldest first. Each entry must
// obey the record limits (valid UTF-8, bounded lengths) and be at a
// higher revision than the one before it (the first may be at 0, the
// creation); the error matches [ErrInvalidRecord]. At most [MaxHistory]
// entries. The trail keeps its own copy of entries.
func NewTrail(entries ...Entry) (Trail, error) {
	t, err := trailOf(append([]Entry(nil), entries...))
	if err != nil {
		return Trail{}, fmt.Errorf("storage: trail: %w: %v", ErrInvalidRecord, err)
	}
	return t, nil
}

// trailOf is NewTrail taking entries over instead of copying them; the
// error names no sentinel (decoding adds ErrCorrupt, NewTrail
// ErrInvalidRecord).
func trailOf(entries []Entry) (Trail, error) {
	if err := checkEntries(entries); err != nil {
		return Trail{}, err
	}
	if len(entries) == 0 {
		return Trail{}, nil
	}
	return Trail{entries: entries}, nil
}

// checkEntries returns what is wrong with a trail's entries.
func checkEntries(entries []Entry) error {
	if len(entries) > MaxHistory {
		return fmt.Errorf("history has %d entries, at most %d", len(entries), MaxHistory)
	}
	for k := range entries {
		if err := entries[k].check(); err != nil {
			return fmt.Errorf("history[%d]: %v", k, err)
		}
		if k > 0 && entries[k].Revision <= entries[k-1].Revision {
			return fmt.Errorf("history[%d] is at revision %d, not after history[%d] at %d",
				k, entries[k].Revision, k-1, entries[k-1].Revision)
		}
	}
	return nil
}

// Append returns the trail with e added as its newest entry, keeping at
// most keep entries (1 to [MaxHistory]). When there are more, the entries
// that record no move go first, oldest first (a metadata-only write, a
// take-over in place: From equal to To), and only then the oldest moves:
// a controller recording progress in metadata, or taking an execution
// over on every run, never pushes the moves out of the history. e must
// obey the record limits and be at a higher revision than the newest
// entry; the error matches [ErrInvalidRecord]. t itself is unchanged.
// Append copies the entries it keeps; a writer appending to its own
// trails again and again does it without copying through a
// [TrailAppender].
func (t Trail) Append(e Entry, keep int) (Trail, error) {
	if err := t.checkAppend(e, keep); err != nil {
		return t, err
	}
	next := append(make([]Entry, 0, len(t.entries)+1), t.entries...)
	return Trail{entries: keepEntries(append(next, e), keep)}, nil
}

// moves reports whether e records a move (or the creation), not a write
// in place.
func (e Entry) moves() bool { return e.From != e.To }

// keepEntries returns the entries a trail keeping keep keeps, in place:
// all of them when they fit; otherwise it drops the entries that record
// no move, oldest first, then the oldest moves. The newest entry is
// always kept.
func keepEntries(entries []Entry, keep int) []Entry {
	drop := len(entries) - keep
	if drop <= 0 {
		return entries
	}
	others := 0 // the entries in place to drop, oldest first
	for _, e := range entries[:len(entries)-1] {
		if others < drop && !e.moves() {
			others++
		}
	}
	moves := drop - others // the oldest moves to drop as well
	kept := entries[:0]
	for k, e := range entries {
		switch {
		case k < len(entries)-1 && others > 0 && !e.moves():
			others--
		case k < len(entries)-1 && moves > 0 && e.moves():
			moves--
		default:
			kept = append(kept, e)
		}
	}
	return kept
}

// checkAppend returns what is wrong with appending e to t keeping keep.
func (t Trail) checkAppend(e Entry, keep int) error {
	if keep < 1 || keep > MaxHistory {
		return fmt.Errorf("storage: trail: %w: keep %d, want 1 to %d", ErrInvalidRecord, keep, MaxHistory)
	}
	if err := e.check(); err != nil {
		return fmt.Errorf("storage: trail: %w: new entry: %v", ErrInvalidRecord, err)
	}
	if last, ok := t.Last(); ok && e.Revision <= last.Revision {
		return fmt.Errorf("storage: trail: %w: new entry at revision %d, not after the newest at %d",
			ErrInvalidRecord, e.Revision, last.Revision)
	}
	return nil
}

// TrailAppender appends to the trails it made without copying them: a
// writer that owns a record's trail (a transition.Persisted, which
// appends to the trail of the record it last wrote) pays for a copy once
// every keep appends instead of on every one. Appending to any other
// trail copies, as [Trail.Append] does, so the result is the same
// whatever is passed in. Its zero value is ready to use and it is safe
// for concurrent use.
//
// Why it is safe to share the trails it makes: each one ends where the
// appender had written up to, and holds no spare capacity (a full slice
// expression), so nobody else can write past its end; the appender writes
// only past the end of everything it has handed out.
type TrailAppender struct {
	mu      sync.Mutex
	backing []Entry // len == cap; entries [0, end) are written
	end     int
}

// Append is [Trail.Append], without copying when t is the trail this
// appender made last.
func (a *TrailAppender) Append(t Trail, e Entry, keep int) (Trail, error) {
	if err := t.checkAppend(e, keep); err != nil {
		return t, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(t.entries)
	// Without a copy: t is the appender's newest trail, and the entry to
	// drop, if any, is its oldest (the window slides).
	slides := n < keep || n == keep && (!t.entries[0].moves() || !slices.ContainsFunc(t.entries, func(e Entry) bool { return !e.moves() }))
	if slides && n > 0 && a.end > 0 && a.end < len(a.backing) && &t.entries[n-1] == &a.backing[a.end-1] {
		a.backing[a.end] = e
		a.end++
		start := a.end - min(n+1, keep)
		return Trail{entries: a.backing[start:a.end:a.end]}, nil
	}
	// Room for keep more appends before the next copy.
	backing := append(make([]Entry, 0, max(n+1, 2*keep)), t.entries...)
	a.end = len(keepEntries(append(backing, e), keep))
	a.backing = backing[:cap(backing)]
	return Trail{entries: a.backing[:a.end:a.end]}, nil
}

// Len returns the number of entries.
func (t Trail) Len() int { return len(t.entries) }

// Last returns the newest entry, and false for the empty trail.
func (t Trail) Last() (Entry, bool) {
	if len(t.entries) == 0 {
		return Entry{}, false
	}
	return t.entries[len(t.entries)-1], true
}

// Entries returns a copy of the entries, oldest first; nil for the empty
// trail.
func (t Trail) Entries() []Entry {
	if len(t.entries) == 0 {
		return nil
	}
	return append([]Entry(nil), t.entries...)
}

// All yields the entries with their positions, oldest first, without
// copying them.
func (t Trail) All() iter.Seq2[int, Entry] {
	return func(yield func(int, Entry) bool) {
		for k, e := range t.entries {
			if !yield(k, e) {
				return
			}
		}
	}
}

// MarshalJSON encodes the trail as a JSON array of its entries, oldest
// first, the form records have always been stored in.
func (t Trail) MarshalJSON() ([]byte, error) {
	if len(t.entries) == 0 {
		return []byte("[]"), nil
	}
	return json.Marshal(t.entries)
}

// UnmarshalJSON decodes what MarshalJSON wrote (null is the empty trail)
// and checks it as [NewTrail] does. Unknown fields in an entry are an
// error, as they are in a stored record.
func (t *Trail) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []Entry
	if err := dec.Decode(&entries); err != nil {
		return err
	}
	trail, err := trailOf(entries)
	if err != nil {
		return fmt.Errorf("storage: trail: %w: %v", ErrInvalidRecord, err)
	}
	*t = trail
	return nil
}

package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
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
//
// A trail keeps each entry's times as a store does, without a monotonic
// clock reading (see [time.Time.Round]): an entry read back from a trail
// is its entry with At.Round(0).
type Trail struct {
	// texts are the distinct texts of the entries (statuses, reasons,
	// actors, owners), sorted: equal entries make equal trails. A full
	// trail repeats the same few texts sixteen times; trails made one
	// from the other share them. Never modified once made.
	texts []string
	// entries are the entries without their texts and zones: 40 bytes
	// each and no pointer, where an Entry is 120 bytes with six. A
	// controller holding 100k records holds 1.6M of them, and paid for
	// the difference in first touches of memory and in the collector's
	// marking (docs/decisions/2026-12-06-packed-trail.md). Never
	// modified after the Trail is made; nil when empty.
	entries []packedEntry
	// zones are each entry's At location, nil for UTC; nil when every
	// entry's is UTC, as every entry a Persisted writes or a store
	// decodes from a time ending in Z is.
	zones []*time.Location
}

// packedEntry is an [Entry] in a [Trail]: its texts are indexes into the
// trail's texts, its time the seconds and nanoseconds of At (its zone,
// if not UTC, in the trail's zones).
type packedEntry struct {
	epoch, revision                uint64
	sec                            int64 // At.Unix()
	nsec                           int32 // At.Nanosecond()
	from, to, reason, actor, owner uint16
}

// moves reports whether p records a move (or the creation), not a write
// in place: distinct texts have distinct indexes.
func (p *packedEntry) moves() bool { return p.from != p.to }

func (p *packedEntry) epochOf() uint64 { return p.epoch }

// fields returns the indexes of p's texts.
func (p *packedEntry) fields() [5]uint16 { return [5]uint16{p.from, p.to, p.reason, p.actor, p.owner} }

// NewTrail returns the trail of entries, oldest first. Each entry must
// obey the record limits (valid UTF-8, bounded lengths) and be at a
// higher revision than the one before it (the first may be at 0, the
// creation); the error matches [ErrInvalidRecord]. At most [MaxHistory]
// entries. The trail keeps its own copy of entries.
func NewTrail(entries ...Entry) (Trail, error) {
	t, err := trailOf(entries)
	if err != nil {
		return Trail{}, fmt.Errorf("storage: trail: %w: %v", ErrInvalidRecord, err)
	}
	return t, nil
}

// trailOf is NewTrail with an error that names no sentinel (decoding adds
// ErrCorrupt, NewTrail ErrInvalidRecord). entries are not kept.
func trailOf(entries []Entry) (Trail, error) {
	if err := checkBounds(entries); err != nil {
		return Trail{}, err
	}
	t := pack(entries, nil)
	// Each distinct text checked once: a full trail has a few texts in
	// its eighty fields, and checking every field was most of the check
	// of a decoded record.
	for _, text := range t.texts {
		if !utf8.ValidString(text) {
			return Trail{}, checkEntries(entries) // says which entry
		}
	}
	return t, nil
}

// checkBounds is checkEntries without checking that the texts are
// UTF-8: the number of entries, the lengths of their texts and the order
// of their revisions.
func checkBounds(entries []Entry) error {
	if len(entries) > MaxHistory {
		return fmt.Errorf("history has %d entries, at most %d", len(entries), MaxHistory)
	}
	for k := range entries {
		e := &entries[k]
		if len(e.From) > MaxStatusLen || len(e.To) > MaxStatusLen || len(e.Reason) > MaxReasonLen ||
			len(e.Actor) > MaxOwnerLen || len(e.Owner) > MaxOwnerLen {
			return fmt.Errorf("history[%d]: %v", k, e.check())
		}
		if k > 0 && e.Revision <= entries[k-1].Revision {
			return fmt.Errorf("history[%d] is at revision %d, not after history[%d] at %d",
				k, e.Revision, k-1, entries[k-1].Revision)
		}
	}
	return nil
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

// pack returns the trail of entries, which are checked (at most
// MaxHistory of them). It shares like's texts when they are the texts
// entries have, as a trail appended to usually has its predecessor's.
func pack(entries []Entry, like []string) Trail {
	if len(entries) == 0 {
		return Trail{}
	}
	var room [5 * DefaultHistoryLimit]string
	texts := room[:0]
	var at map[string]uint16
	index := func(s string) uint16 {
		k, ok := findText(texts, at, s)
		if !ok {
			texts, at, k = addText(texts, at, s)
		}
		return k
	}
	packed := make([]packedEntry, len(entries))
	var zones []*time.Location
	for k := range entries {
		e := &entries[k]
		packed[k] = packedEntry{epoch: e.Epoch, revision: e.Revision, sec: e.At.Unix(), nsec: int32(e.At.Nanosecond()),
			from: index(e.From), to: index(e.To), reason: index(e.Reason), actor: index(e.Actor), owner: index(e.Owner)}
		if loc := e.At.Location(); loc != time.UTC {
			if zones == nil {
				zones = make([]*time.Location, len(entries))
			}
			zones[k] = loc
		}
	}
	return packedTrail(texts, packed, zones, like)
}

// findText returns the index of s in texts, if it is there; at, made
// once there are many texts, finds it without a search. A full trail has
// a few distinct texts, found by a linear search that compares the
// pointers of equal strings first (decoding makes one copy of each
// text). findText and addText are functions of values, not methods:
// through a pointer the compiler would move their callers' stack buffers
// to the heap.
func findText(texts []string, at map[string]uint16, s string) (uint16, bool) {
	if at != nil {
		k, ok := at[s]
		return k, ok
	}
	for k, t := range texts {
		if t == s {
			return uint16(k), true
		}
	}
	return 0, false
}

// addText returns texts and at with s, which they lack, added, and its
// index.
func addText(texts []string, at map[string]uint16, s string) ([]string, map[string]uint16, uint16) {
	k := uint16(len(texts))
	texts = append(texts, s)
	switch {
	case at != nil:
		at[s] = k
	case len(texts) == 32:
		at = make(map[string]uint16, 64)
		for k, t := range texts {
			at[t] = uint16(k)
		}
	}
	return texts, at, k
}

// packedTrail returns the trail of packed, whose texts index texts in the
// order they were found in, sharing like's texts when they are the
// same. It takes packed and zones for its own, and keeps nothing of texts.
func packedTrail(texts []string, packed []packedEntry, zones []*time.Location, like []string) Trail {
	if len(packed) == 0 {
		return Trail{}
	}
	// On the stack for a trail of the default length: two allocations
	// of every record read otherwise.
	var orderRoom, sortedRoom [5 * DefaultHistoryLimit]uint16
	order, sorted := orderRoom[:0], sortedRoom[:0]
	if len(texts) > len(orderRoom) {
		order, sorted = make([]uint16, 0, len(texts)), make([]uint16, 0, len(texts))
	}
	order = order[:len(texts)] // first-use index -> sorted index
	sorted = sorted[:len(texts)]
	for k := range sorted {
		sorted[k] = uint16(k)
	}
	slices.SortFunc(sorted, func(a, b uint16) int { return strings.Compare(texts[a], texts[b]) })
	for k, first := range sorted {
		order[first] = uint16(k)
	}
	if !sameTexts(like, texts, sorted) {
		like = make([]string, len(texts))
		for k, first := range sorted {
			like[k] = texts[first]
		}
	}
	for k := range packed {
		e := &packed[k]
		e.from, e.to, e.reason, e.actor, e.owner = order[e.from], order[e.to], order[e.reason], order[e.actor], order[e.owner]
	}
	return Trail{texts: like, entries: packed, zones: zones}
}

// sameTexts reports whether like is texts in the order sorted gives.
func sameTexts(like, texts []string, sorted []uint16) bool {
	if len(like) != len(texts) {
		return false
	}
	for k, first := range sorted {
		if like[k] != texts[first] {
			return false
		}
	}
	return true
}

// entry returns the k-th entry.
func (t Trail) entry(k int) Entry {
	p := &t.entries[k]
	return Entry{From: t.texts[p.from], To: t.texts[p.to], Reason: t.texts[p.reason], Actor: t.texts[p.actor],
		Owner: t.texts[p.owner], Epoch: p.epoch, At: t.at(k), Revision: p.revision}
}

// at returns the k-th entry's At.
func (t Trail) at(k int) time.Time {
	p := &t.entries[k]
	at := time.Unix(p.sec, int64(p.nsec)).UTC()
	if t.zones != nil && t.zones[k] != nil {
		at = at.In(t.zones[k])
	}
	return at
}

// Append returns the trail with e added as its newest entry, keeping at
// most keep entries (1 to [MaxHistory]). When there are more, progress
// goes first, oldest first (a write in place, From equal to To, at the
// epoch of the entry before it: a metadata-only write), then the
// take-overs in place (at a new epoch: what records a crash restart),
// and only then the oldest moves: a controller recording progress in
// metadata never pushes a take-over or a move out of the history, nor
// one taking the execution over on every run a move. e must
// obey the record limits and be at a higher revision than the newest
// entry; the error matches [ErrInvalidRecord]. t itself is unchanged.
// Append copies the entries it keeps; a writer appending to its own
// trails again and again does it without copying through a
// [TrailAppender].
func (t Trail) Append(e Entry, keep int) (Trail, error) {
	if err := t.checkAppend(&e, keep); err != nil {
		return t, err
	}
	return t.appended(e, keep), nil
}

// appended is Append after its checks.
func (t Trail) appended(e Entry, keep int) Trail {
	if p, ok := t.packEntry(&e); ok {
		if entries, ok := t.extend(p, keep, len(t.entries)+1); ok {
			return Trail{texts: t.texts, entries: entries[:len(entries):len(entries)]}
		}
	}
	return t.repacked(e, keep)
}

// repacked is appended when the trail's texts change (or a zone is not
// UTC): the entries rebuilt, e appended, packed again.
func (t Trail) repacked(e Entry, keep int) Trail {
	all := make([]Entry, 0, len(t.entries)+1)
	for k := range t.entries {
		all = append(all, t.entry(k))
	}
	return pack(keepEntries(append(all, e), keep), t.texts)
}

// packEntry returns e as an entry of t, if t has e's texts and e, as
// every entry of t, is in UTC: the usual case, an entry that records
// another move between the statuses the trail already has.
func (t Trail) packEntry(e *Entry) (packedEntry, bool) {
	if len(t.entries) == 0 || t.zones != nil || e.At.Location() != time.UTC {
		return packedEntry{}, false
	}
	// The next entry usually repeats the newest one's reason, actor and
	// owner and starts where it ended: try those indexes before a search.
	newest := &t.entries[len(t.entries)-1]
	p := packedEntry{epoch: e.Epoch, revision: e.Revision, sec: e.At.Unix(), nsec: int32(e.At.Nanosecond())}
	for _, f := range [...]struct {
		text          string
		likely, other uint16
		to            *uint16
	}{
		{e.From, newest.to, newest.from, &p.from}, {e.To, newest.from, newest.to, &p.to},
		{e.Reason, newest.reason, newest.reason, &p.reason}, {e.Actor, newest.actor, newest.actor, &p.actor},
		{e.Owner, newest.owner, newest.owner, &p.owner},
	} {
		k, ok := t.index(f.text, f.likely, f.other)
		if !ok {
			return packedEntry{}, false
		}
		*f.to = k
	}
	return p, true
}

// index returns the index of text in t's texts, trying likely and then
// other before a binary search, and whether it is there.
func (t Trail) index(text string, likely, other uint16) (uint16, bool) {
	// Equal strings are often the same string (a table's names, decoded
	// texts), which the comparison sees without reading their bytes.
	if t.texts[likely] == text {
		return likely, true
	}
	if t.texts[other] == text {
		return other, true
	}
	k, ok := slices.BinarySearch(t.texts, text)
	return uint16(k), ok
}

// extend returns t's entries with p appended, keeping keep, in a new
// slice with room for room entries, and whether they use every one of
// t's texts (if not, they are not a trail with t's texts).
func (t Trail) extend(p packedEntry, keep, room int) ([]packedEntry, bool) {
	entries := make([]packedEntry, 0, max(room, len(t.entries)+1))
	entries = keepEntries(append(append(entries, t.entries...), p), keep)
	unused := len(t.texts)
	var few [5 * DefaultHistoryLimit]bool
	var seen []bool
	if len(t.texts) <= len(few) {
		seen = few[:len(t.texts)]
	} else {
		seen = make([]bool, len(t.texts))
	}
	for k := range entries {
		for _, i := range entries[k].fields() {
			if !seen[i] {
				seen[i] = true
				unused--
			}
		}
	}
	return entries, unused == 0
}

// moves reports whether e records a move (or the creation), not a write
// in place.
func (e *Entry) moves() bool { return e.From != e.To }

func (e *Entry) epochOf() uint64 { return e.Epoch }

// What an entry records, in the order a full trail lets them go: a
// write in place under the ownership of the entry before (progress in
// metadata) first, then a write in place at another epoch (a take-over,
// which records a crash restart or a relocation taken up), then a move.
// An oldest entry in place, whose predecessor is gone, counts as a
// take-over: nothing says it was not.
const (
	rankProgress = iota
	rankTakeOver
	rankMove
	ranks
)

// rankOf is the rank of entry e, prev the epoch of the entry before it
// (first: there is none).
func rankOf[E any, P interface {
	*E
	moves() bool
	epochOf() uint64
}](e P, prev uint64, first bool) int {
	switch {
	case e.moves():
		return rankMove
	case first || e.epochOf() != prev:
		return rankTakeOver
	}
	return rankProgress
}

// keepEntries returns the entries a trail keeping keep keeps, in place:
// all of them when they fit; otherwise it drops progress, oldest first,
// then take-overs, then the oldest moves. The newest entry is always
// kept.
func keepEntries[E any, P interface {
	*E
	moves() bool
	epochOf() uint64
}](entries []E, keep int) []E {
	drop := len(entries) - keep
	if drop <= 0 {
		return entries
	}
	var count [ranks]int
	for k := range entries[:len(entries)-1] {
		prev := uint64(0)
		if k > 0 {
			prev = P(&entries[k-1]).epochOf()
		}
		count[rankOf[E, P](&entries[k], prev, k == 0)]++
	}
	var dropping [ranks]int // how many of each rank go, oldest first
	for r := range ranks {
		dropping[r] = min(count[r], drop)
		drop -= dropping[r]
	}
	kept := entries[:0]
	prev := uint64(0)
	for k := range entries {
		e := P(&entries[k])
		r, epoch := rankOf[E, P](e, prev, k == 0), e.epochOf()
		prev = epoch // read before kept may overwrite entries[k]
		if k < len(entries)-1 && dropping[r] > 0 {
			dropping[r]--
			continue
		}
		kept = append(kept, entries[k])
	}
	return kept
}

// checkAppend returns what is wrong with appending e to t keeping keep.
func (t Trail) checkAppend(e *Entry, keep int) error {
	if keep < 1 || keep > MaxHistory {
		return fmt.Errorf("storage: trail: %w: keep %d, want 1 to %d", ErrInvalidRecord, keep, MaxHistory)
	}
	if err := e.check(); err != nil {
		return fmt.Errorf("storage: trail: %w: new entry: %v", ErrInvalidRecord, err)
	}
	if n := len(t.entries); n > 0 && e.Revision <= t.entries[n-1].revision {
		return fmt.Errorf("storage: trail: %w: new entry at revision %d, not after the newest at %d",
			ErrInvalidRecord, e.Revision, t.entries[n-1].revision)
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
	backing []packedEntry // len == cap; entries [start, end) are the newest trail's
	start   int
	end     int
	texts   []string // the newest trail's
	uses    []int32  // how many fields of the newest trail's entries are each of texts
}

// Append is [Trail.Append], without copying when t is the trail this
// appender made last.
func (a *TrailAppender) Append(t Trail, e Entry, keep int) (Trail, error) {
	if err := t.checkAppend(&e, keep); err != nil {
		return t, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, packs := t.packEntry(&e)
	if packs {
		if next, ok := a.slide(t, p, keep); ok {
			return next, nil
		}
	}
	// Room for keep more appends before the next copy.
	room := 2 * keep
	var texts []string
	var entries []packedEntry
	if packs {
		if extended, ok := t.extend(p, keep, room); ok {
			texts, entries = t.texts, extended
		}
	}
	if texts == nil {
		next := t.repacked(e, keep)
		if next.zones != nil {
			return next, nil // slide takes only trails all in UTC
		}
		texts, entries = next.texts, append(make([]packedEntry, 0, room), next.entries...)
	}
	n := len(entries)
	a.backing, a.start, a.end, a.texts = entries[:cap(entries)], 0, n, texts
	a.uses = make([]int32, len(texts))
	for k := range entries {
		a.use(&entries[k], 1)
	}
	return Trail{texts: texts, entries: entries[:n:n]}, nil
}

// slide appends p (an entry packed with t's texts) to t without a copy,
// if t is the appender's newest trail, the entry to drop (if any) is its
// oldest (the window slides), and the texts the trail has after it are
// the ones it had: those of the entry dropped are still used.
func (a *TrailAppender) slide(t Trail, p packedEntry, keep int) (Trail, bool) {
	n := len(t.entries)
	if n == 0 || n != a.end-a.start || a.end >= len(a.backing) || &t.entries[n-1] != &a.backing[a.end-1] {
		return Trail{}, false
	}
	drops := n == keep
	if n > keep || drops && !oldestGoesFirst(t.entries) {
		return Trail{}, false // another entry goes before the oldest
	}
	a.use(&p, 1)
	if drops {
		oldest := &a.backing[a.start]
		a.use(oldest, -1)
		for _, k := range oldest.fields() {
			if a.uses[k] == 0 {
				a.use(oldest, 1)
				a.use(&p, -1)
				return Trail{}, false
			}
		}
		a.start++
	}
	a.backing[a.end] = p
	a.end++
	return Trail{texts: a.texts, entries: a.backing[a.start:a.end:a.end]}, true
}

// use counts p's fields as used in the newest trail delta times more.
func (a *TrailAppender) use(p *packedEntry, delta int32) {
	// Field by field: ranging over p.fields() made a third of a Fire's
	// trail append.
	a.uses[p.from] += delta
	a.uses[p.to] += delta
	a.uses[p.reason] += delta
	a.uses[p.actor] += delta
	a.uses[p.owner] += delta
}

// oldestGoesFirst reports whether keepEntries, with one entry to drop
// from entries and a newer one, drops the oldest: no other entry ranks
// lower.
func oldestGoesFirst(entries []packedEntry) bool {
	oldest := rankOf[packedEntry](&entries[0], 0, true)
	for k := 1; k < len(entries) && oldest > rankProgress; k++ {
		if rankOf[packedEntry](&entries[k], entries[k-1].epoch, false) < oldest {
			return false
		}
	}
	return true
}

// Len returns the number of entries.
func (t Trail) Len() int { return len(t.entries) }

// Last returns the newest entry, and false for the empty trail.
func (t Trail) Last() (Entry, bool) {
	if len(t.entries) == 0 {
		return Entry{}, false
	}
	return t.entry(len(t.entries) - 1), true
}

// Entries returns a copy of the entries, oldest first; nil for the empty
// trail.
func (t Trail) Entries() []Entry {
	if len(t.entries) == 0 {
		return nil
	}
	entries := make([]Entry, len(t.entries))
	for k := range entries {
		entries[k] = t.entry(k)
	}
	return entries
}

// All yields the entries with their positions, oldest first, without
// copying them all.
func (t Trail) All() iter.Seq2[int, Entry] {
	return func(yield func(int, Entry) bool) {
		for k := range t.entries {
			if !yield(k, t.entry(k)) {
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
	return json.Marshal(t.Entries())
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

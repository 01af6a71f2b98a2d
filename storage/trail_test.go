package storage_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestNewTrailRefusesWhatNoRecordMayCarry(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	for name, mutate := range map[string]func([]storage.Entry) []storage.Entry{
		"1 MB reason":   func(e []storage.Entry) []storage.Entry { e[0].Reason = huge; return e },
		"invalid UTF-8": func(e []storage.Entry) []storage.Entry { e[1].Actor = "pod-\xff"; return e },
		"long status": func(e []storage.Entry) []storage.Entry {
			e[2].To = strings.Repeat("s", storage.MaxStatusLen+1)
			return e
		},
		"out of order":      func(e []storage.Entry) []storage.Entry { e[2].Revision = 1; return e },
		"repeated revision": func(e []storage.Entry) []storage.Entry { e[2].Revision = e[1].Revision; return e },
		"beyond MaxHistory": func([]storage.Entry) []storage.Entry { return storagetest.TrailEntries(storage.MaxHistory + 1) },
	} {
		_, err := storage.NewTrail(mutate(storagetest.TrailEntries(3))...)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, name)
	}
	// Texts are checked once each, not field by field; the error still
	// names the entry and the field.
	entries := storagetest.TrailEntries(3)
	entries[2].Owner = "pod-\xff"
	_, err := storage.NewTrail(entries...)
	require.ErrorContains(t, err, "history[2]: owner")
}

func TestTrailIsImmutable(t *testing.T) {
	entries := storagetest.TrailEntries(3)
	trail, err := storage.NewTrail(entries...)
	require.NoError(t, err)
	entries[0].Reason = "changed after NewTrail"
	got := trail.Entries()
	require.Equal(t, "move 0", got[0].Reason, "the trail keeps its own copy")
	got[1].Reason = "changed in a copy"
	require.Equal(t, "move 1", trail.Entries()[1].Reason, "Entries returns a copy")

	longer, err := trail.Append(storage.Entry{From: "running", To: "paused", Revision: 10}, 3)
	require.NoError(t, err)
	require.Equal(t, 3, trail.Len(), "Append leaves its trail alone")
	require.Equal(t, []string{"move 1", "move 2", ""}, reasons(longer), "and drops the oldest beyond keep")
	// Two appends to one trail do not see each other.
	other, err := trail.Append(storage.Entry{From: "running", To: "stopping", Reason: "other", Revision: 10}, 8)
	require.NoError(t, err)
	require.Equal(t, []string{"move 0", "move 1", "move 2", "other"}, reasons(other))
	require.Equal(t, []string{"move 1", "move 2", ""}, reasons(longer))
}

func TestTrailAppendRefusesAndKeepsTheTrail(t *testing.T) {
	trail := storagetest.Trail(t, 3) // revisions 1 to 3
	for name, tc := range map[string]struct {
		e    storage.Entry
		keep int
	}{
		"at the newest revision": {storage.Entry{From: "a", To: "b", Revision: 3}, 8},
		"below it":               {storage.Entry{From: "a", To: "b", Revision: 1}, 8},
		"invalid text":           {storage.Entry{From: "a", To: "b", Reason: "\xc3\x28", Revision: 4}, 8},
		"keep 0":                 {storage.Entry{From: "a", To: "b", Revision: 4}, 0},
		"keep beyond MaxHistory": {storage.Entry{From: "a", To: "b", Revision: 4}, storage.MaxHistory + 1},
	} {
		got, err := trail.Append(tc.e, tc.keep)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, name)
		require.Equal(t, trail, got, name)
	}
}

func TestTrailJSONIsAnArrayOfEntries(t *testing.T) {
	trail := storagetest.Trail(t, 2)
	data, err := json.Marshal(trail)
	require.NoError(t, err)
	var entries []storage.Entry
	require.NoError(t, json.Unmarshal(data, &entries), "the stored form: a plain array")
	require.Len(t, entries, 2)
	var back storage.Trail
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, trail.Len(), back.Len())

	empty, err := json.Marshal(storage.Trail{})
	require.NoError(t, err)
	require.JSONEq(t, `[]`, string(empty))
	require.NoError(t, json.Unmarshal([]byte(`null`), &back))
	require.Equal(t, storage.Trail{}, back, "null is the empty trail")

	for name, bad := range map[string]string{
		"out of order":  `[{"from":"a","to":"b","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5},{"from":"b","to":"c","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5}]`,
		"unknown field": `[{"from":"a","to":"b","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5,"color":"red"}]`,
		"not an array":  `{"from":"a"}`,
	} {
		back = trail
		require.Error(t, json.Unmarshal([]byte(bad), &back), name)
		require.Equal(t, trail, back, "%s: a failed decode leaves the trail alone", name)
	}
}

// model is what a trail keeping keep holds after appending e to held:
// when over, the oldest entry that records no move goes, else the
// oldest; the newest always stays.
func model(held []storage.Entry, e storage.Entry, keep int) []storage.Entry {
	next := append(append([]storage.Entry(nil), held...), e)
	for len(next) > keep {
		drop, lowest := 0, 3
		for k := range next[:len(next)-1] {
			if r := modelRank(next, k); r < lowest {
				drop, lowest = k, r
			}
		}
		next = append(next[:drop], next[drop+1:]...)
	}
	return next
}

// modelRank is what entries[k] records, by what a full trail lets go
// first: 0 progress (in place, at the epoch of the entry before), 1 a
// take-over (in place, at another epoch, or with no entry before), 2 a
// move.
func modelRank(entries []storage.Entry, k int) int {
	switch e := entries[k]; {
	case e.From != e.To:
		return 2
	case k == 0 || e.Epoch != entries[k-1].Epoch:
		return 1
	}
	return 0
}

// entryGen draws an entry at revision rev: a move, or a write in place
// (metadata only, a take-over) one time in three, with texts from a few
// (so a trail's texts change as entries come and go), now and then an
// actor of a length of its own, and at a time in UTC or, rarely, in
// another zone, with or without a monotonic clock reading.
func entryGen(rt *rapid.T, rev uint64) storage.Entry {
	at := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).Add(time.Duration(rev) * time.Millisecond)
	switch rapid.IntRange(0, 9).Draw(rt, "zone") {
	case 0:
		at = at.In(time.FixedZone("", 3600)) // unnamed, as JSON brings it back
	case 1:
		at = time.Now() // a monotonic reading, which a trail does not keep
	}
	e := storage.Entry{From: "a", To: "b", Reason: "move", Revision: rev, At: at, Epoch: rapid.Uint64Range(1, 2).Draw(rt, "epoch"),
		Actor: rapid.SampledFrom([]string{"", "pod-a", "pod-b", strings.Repeat("p", 40)}).Draw(rt, "actor")}
	if rapid.IntRange(0, 2).Draw(rt, "kind") == 0 {
		e.From, e.To, e.Reason = "b", "b", rapid.SampledFrom([]string{"meta", "progress"}).Draw(rt, "reason")
	}
	return e
}

// inUTC is entries with their times in UTC.
func inUTC(entries []storage.Entry) []storage.Entry {
	out := asStored(entries...)
	for k := range out {
		out[k].At = out[k].At.UTC()
	}
	return out
}

// asStored is e as a trail keeps it: its time without a monotonic clock
// reading.
func asStored(entries ...storage.Entry) []storage.Entry {
	if entries == nil {
		return nil
	}
	out := make([]storage.Entry, len(entries))
	for k, e := range entries {
		e.At = e.At.Round(0)
		out[k] = e
	}
	return out
}

// Whatever a sequence of appends does, the trail holds what the model
// says, in order, exactly entries appended: the moves outlive the writes
// in place.
func TestTrailAppendProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keep := rapid.IntRange(1, storage.MaxHistory).Draw(rt, "keep")
		n := rapid.IntRange(0, 3*storage.MaxHistory).Draw(rt, "appends")
		var trail storage.Trail
		var want []storage.Entry
		var all []storage.Entry
		for k := range n {
			e := entryGen(rt, uint64(k))
			next, err := trail.Append(e, keep)
			require.NoError(rt, err)
			require.Equal(rt, min(k, keep), trail.Len(), "the trail appended to is unchanged")
			trail, all, want = next, append(all, e), model(want, e, keep)
		}
		if len(want) == 0 {
			want = nil
		}
		want = asStored(want...)
		require.Equal(rt, want, trail.Entries())
		if last, ok := trail.Last(); ok {
			require.Equal(rt, asStored(all[len(all)-1])[0], last)
		}
		var seen int
		for k, e := range trail.All() {
			require.Equal(rt, want[k], e)
			seen++
		}
		require.Equal(rt, len(want), seen)
		made, err := storage.NewTrail(want...)
		require.NoError(rt, err)
		require.Equal(rt, made, trail, "equal entries make equal trails, however they were made")
		raw, err := json.Marshal(trail)
		require.NoError(rt, err)
		var back storage.Trail
		require.NoError(rt, json.Unmarshal(raw, &back))
		require.Equal(rt, inUTC(want), inUTC(back.Entries()), "a trail survives its JSON (which keeps offsets, not zones)")
	})
}

func reasons(trail storage.Trail) []string {
	var out []string
	for _, e := range trail.All() {
		out = append(out, e.Reason)
	}
	return out
}

// A TrailAppender gives what Trail.Append gives, whichever trail it is
// handed (its own newest, an older one of its own, someone else's), and
// never changes a trail it handed out before.
func TestTrailAppenderMatchesAppendAndChangesNoTrail(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var a storage.TrailAppender
		made := []storage.Trail{{}}
		var snapshots [][]storage.Entry // what each trail in made held when made
		snapshots = append(snapshots, nil)
		steps := rapid.IntRange(1, 100).Draw(rt, "steps")
		for k := range steps {
			from := len(made) - 1 // usually the newest, as a Persisted does
			if rapid.Bool().Draw(rt, "older") {
				from = rapid.IntRange(0, len(made)-1).Draw(rt, "from")
			}
			keep := rapid.IntRange(1, 8).Draw(rt, "keep")
			base := made[from]
			rev := uint64(1000 + k)
			e := entryGen(rt, rev)
			want, werr := base.Append(e, keep)
			got, gerr := a.Append(base, e, keep)
			require.Equal(rt, werr == nil, gerr == nil)
			require.Equal(rt, want.Entries(), got.Entries())
			require.Equal(rt, want, got, "equal entries make equal trails")
			made, snapshots = append(made, got), append(snapshots, got.Entries())
			for i, tr := range made {
				require.Equal(rt, snapshots[i], tr.Entries(), "trail %d changed after it was made", i)
			}
		}
	})
}

// A controller that records its progress in metadata after every move
// keeps its moves in the history: the writes in place go first.
func TestMetadataWritesDoNotPushTheMovesOutOfTheHistory(t *testing.T) {
	var trail storage.Trail
	var err error
	rev := uint64(0)
	appendEntry := func(from, to, reason string) {
		rev++
		trail, err = trail.Append(storage.Entry{From: from, To: to, Reason: reason, Revision: rev}, 4)
		require.NoError(t, err)
	}
	appendEntry("", "pending", "created")
	appendEntry("pending", "running", "started")
	for range 10 {
		appendEntry("running", "running", "progress")
	}
	appendEntry("running", "completed", "done")
	require.Equal(t, []string{"created", "started", "progress", "done"}, reasons(trail))
}

// Handles of one record append concurrently (their guards run unlocked):
// the appender is safe for that, and every result is whole.
func TestTrailAppenderConcurrentAppends(t *testing.T) {
	var a storage.TrailAppender
	base, err := a.Append(storagetest.Trail(t, 3), storage.Entry{From: "a", To: "b", Revision: 10}, 4)
	require.NoError(t, err)
	results := make(chan storage.Trail, 8)
	for w := range 8 {
		go func() {
			tr, err := a.Append(base, storage.Entry{From: "a", To: "b", Reason: strings.Repeat("w", w), Revision: 11}, 4)
			if err != nil {
				panic(err)
			}
			results <- tr
		}()
	}
	seen := map[string]bool{}
	for range 8 {
		tr := <-results
		last, _ := tr.Last()
		require.Equal(t, 4, tr.Len())
		require.False(t, seen[last.Reason], "two appends share a slot")
		seen[last.Reason] = true
	}
	require.Equal(t, 4, base.Len())
}

func FuzzTrailUnmarshalJSON(f *testing.F) {
	good, _ := json.Marshal(storagetest.Trail(f, 3))
	f.Add(good)
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[{"from":"a","to":"b","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5},{"from":"b","to":"c","epoch":0,"at":"2026-01-01T00:00:00Z","revision":5}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var trail storage.Trail
		if err := json.Unmarshal(data, &trail); err != nil {
			require.Equal(t, storage.Trail{}, trail, "a failed decode leaves the trail alone")
			return
		}
		// Whatever decodes is a valid trail and survives a round trip.
		again, err := storage.NewTrail(trail.Entries()...)
		require.NoError(t, err)
		data, err = json.Marshal(again)
		require.NoError(t, err)
		var back storage.Trail
		require.NoError(t, json.Unmarshal(data, &back))
		require.Equal(t, trail.Len(), back.Len())
	})
}

package transition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// countedJob is the job table counting its holds as "restarts" and every
// move into Moving as "disruptions".
func countedJob(t testing.TB) *transition.Table[Job] {
	table, err := jobBuilder().
		Count("restarts", Work, Hold).
		Count("disruptions", Work, Moving).
		Count("disruptions", Hold, Moving).
		Build()
	require.NoError(t, err)
	return table
}

func countOf(t *testing.T, rec storage.Record, counter string) transition.Count {
	t.Helper()
	c, err := transition.CountOf(rec, counter)
	require.NoError(t, err)
	return c
}

func TestACountedMoveAddsItsTimeInTheSameWrite(t *testing.T) {
	store := storage.NewMemory()
	p, err := transition.NewPersisted(countedJob(t), store, "ex-1", transition.PersistedOptions{Clock: fixedClock()})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.Update[Job]{To: Queued, Meta: map[string]string{"owner": "alice"}})
	require.NoError(t, err)

	_, err = p.Fire(bg, Work, "scheduled")
	require.NoError(t, err)
	require.Zero(t, countOf(t, mustGet(t, store), "restarts").Total(), "Queued → Working counts nothing")

	var held []time.Time
	for range 3 {
		c, err := p.Fire(bg, Hold, "pod failed")
		require.NoError(t, err)
		held = append(held, c.At)
		_, err = p.Fire(bg, Work, "restarted")
		require.NoError(t, err)
	}
	rec := mustGet(t, store)
	require.Equal(t, transition.Count{First: held[0], Times: held}, countOf(t, rec, "restarts"))
	require.Equal(t, "alice", rec.Meta["owner"], "the caller's metadata stays")
	require.Zero(t, countOf(t, rec, "disruptions").Total())

	// The same edge counted through an update that sets metadata too.
	c, _, err := p.Apply(bg, func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.Update[Job]{To: Moving, Meta: map[string]string{"node": "n2"}}, nil
	})
	require.NoError(t, err)
	rec = mustGet(t, store)
	require.Equal(t, "n2", rec.Meta["node"])
	require.Equal(t, transition.Count{First: c.At, Times: []time.Time{c.At}}, countOf(t, rec, "disruptions"))

	// An operator resets the count with the move that counts: it starts at one.
	_, err = p.Fire(bg, Work, "back")
	require.NoError(t, err)
	c, _, err = p.Apply(bg, func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.Update[Job]{To: Hold, Unset: []string{transition.CountKey("restarts")}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, transition.Count{First: c.At, Times: []time.Time{c.At}}, countOf(t, mustGet(t, store), "restarts"))

	// Metadata alone moves nothing and counts nothing.
	before := countOf(t, mustGet(t, store), "restarts")
	_, _, err = p.Apply(bg, func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.Update[Job]{To: Hold, Meta: map[string]string{"note": "x"}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, before, countOf(t, mustGet(t, store), "restarts"))
}

func TestACountThatDoesNotReadStartsAgainRatherThanBlockTheMove(t *testing.T) {
	store := storage.NewMemory()
	p, err := transition.NewPersisted(countedJob(t), store, "ex-1", transition.PersistedOptions{Clock: fixedClock()})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.Update[Job]{To: Work, Meta: map[string]string{transition.CountKey("restarts"): "twice"}})
	require.NoError(t, err)
	_, err = transition.CountOf(mustGet(t, store), "restarts")
	require.ErrorIs(t, err, storage.ErrInvalidRecord)

	c, err := p.Fire(bg, Hold, "pod failed")
	require.NoError(t, err)
	require.Equal(t, transition.Count{First: c.At, Times: []time.Time{c.At}}, countOf(t, mustGet(t, store), "restarts"))
}

func TestATakeOverThatMovesCountsTheMove(t *testing.T) {
	store := storage.NewMemory()
	master, err := transition.NewPersisted(countedJob(t), store, "ex-1", transition.PersistedOptions{Clock: fixedClock()})
	require.NoError(t, err)
	_, err = master.Create(bg, transition.Update[Job]{To: Work})
	require.NoError(t, err)

	pod, err := transition.NewPersisted(countedJob(t), store, "ex-1", transition.PersistedOptions{Clock: fixedClock(), Actor: "pod-a"})
	require.NoError(t, err)
	c, rec, err := pod.Acquire(bg, lease("pod-a"), func(Job, storage.Record) (transition.Update[Job], error) {
		return transition.Update[Job]{To: Moving, Reason: "drained"}, nil
	})
	require.NoError(t, err)
	require.Equal(t, transition.Count{First: c.At, Times: []time.Time{c.At}}, countOf(t, rec, "disruptions"))
	require.Equal(t, rec, mustGet(t, store))
}

func TestCountsAreDescribedAndRebuilt(t *testing.T) {
	d := countedJob(t).Describe()
	require.Equal(t, []transition.CountedEdge{
		{Counter: "restarts", Edge: transition.Edge{From: "working", To: "held"}},
		{Counter: "disruptions", Edge: transition.Edge{From: "working", To: "moving"}},
		{Counter: "disruptions", Edge: transition.Edge{From: "held", To: "moving"}},
	}, d.Counted)
	rebuilt, err := transition.Rebuild(d)
	require.NoError(t, err)
	require.Equal(t, d, rebuilt.Describe())
	require.Equal(t, []string{"disruptions"}, rebuilt.Counters("held", "moving"))
	require.True(t, rebuilt.HasCounter("restarts"))
	require.False(t, rebuilt.HasCounter("failures"))
	require.Empty(t, rebuilt.Counters("held", "working"))
	require.Empty(t, rebuilt.Counters("held", "nowhere"))

	d.Counted = append(d.Counted, transition.CountedEdge{Counter: "x", Edge: transition.Edge{From: "done", To: "gone"}})
	_, err = transition.Rebuild(d)
	require.ErrorIs(t, err, transition.ErrInvalidDescription)
	require.ErrorContains(t, err, `"gone" is not a listed state`)
}

func TestBuildSaysEverythingWrongWithTheCounts(t *testing.T) {
	_, err := jobBuilder().
		Count("Restarts", Work, Hold).
		Count("restarts", Work, Done, Queued, Job("nowhere")).
		Count("restarts", Work, Done).
		Count("restarts", Job("limbo"), Work).
		Count("restarts", Hold).
		Build()
	var be *transition.BuildError
	require.ErrorAs(t, err, &be)
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	require.Equal(t, []string{
		`counter "Restarts": want 1 to 64 lower-case letters, digits, '-', '_' or '.'`,
		"count restarts on working → queued, which is not an allowed edge",
		"count restarts on working → nowhere names an unknown state",
		"count restarts on working → done given twice",
		"count restarts on a move from limbo, an unknown state",
		"count restarts from held names no state to move to",
	}, be.Problems)
}

func TestCountBoundsWhatItKeeps(t *testing.T) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var c transition.Count
	for k := range 150 {
		c = c.Add(start.Add(time.Duration(k) * time.Minute))
	}
	require.Equal(t, 150, c.Total())
	require.Len(t, c.Times, 100)
	require.Equal(t, 50, c.Dropped)
	last, ok := c.Last()
	require.True(t, ok)
	require.Equal(t, start.Add(149*time.Minute), last)
	require.Equal(t, 10, c.Since(start.Add(139*time.Minute)))
	require.Equal(t, 150, c.Since(time.Time{}))
	require.LessOrEqual(t, len(c.String()), storage.MaxMetaValueLen)

	require.Equal(t, start, c.First, "the first move stays known")
	window := c.After(start.Add(145 * time.Minute))
	require.Equal(t, transition.Count{First: start, Times: c.Times[96:]}, window)
	back, err := transition.ParseCount(window.String())
	require.NoError(t, err)
	require.Equal(t, window, back)
	require.Len(t, c.Times, 100, "After leaves the count it was called on")

	_, ok = transition.Count{}.Last()
	require.False(t, ok)
	require.Equal(t, "", transition.Count{}.String())
}

func TestParseCountRefusesWhatIsNotACount(t *testing.T) {
	for _, bad := range []string{"x", "1,,2", "-5", "1:2:3", "-1@0:5", "a@0:5", "5,", "1.5", "3:5", "3@x:5", "3@-1:5"} {
		_, err := transition.ParseCount(bad)
		require.ErrorIs(t, err, storage.ErrInvalidRecord, bad)
	}
	c, err := transition.ParseCount("3@1000:")
	require.NoError(t, err)
	require.Equal(t, transition.Count{First: time.UnixMilli(1000).UTC(), Dropped: 3}, c)
}

func TestCountStringRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := rapid.SliceOfN(rapid.Int64Range(0, 1<<45), 0, 120).Draw(t, "ms")
		var c transition.Count
		for _, m := range ms {
			c = c.Add(time.UnixMilli(m))
		}
		back, err := transition.ParseCount(c.String())
		require.NoError(t, err)
		if len(ms) == 0 {
			require.Equal(t, transition.Count{}, back)
			return
		}
		require.Equal(t, c, back)
		require.Equal(t, len(ms), back.Total())
	})
}

func FuzzParseCount(f *testing.F) {
	for _, seed := range []string{"", "1", "1700000000000,1700000001000", "3@1:1,2", "3@0:", "x", "-1", "1:2:3"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		c, err := transition.ParseCount(value)
		if err != nil {
			require.ErrorIs(t, err, storage.ErrInvalidRecord)
			return
		}
		again, err := transition.ParseCount(c.String())
		require.NoError(t, err, "a parsed count's text parses")
		require.Equal(t, c.Total(), again.Total())
		require.Equal(t, len(c.Times), len(again.Times))
	})
}

// A guard judges by the record it would be written over: "hold only
// while fewer than two holds were counted" needs no read of its own.
func TestAGuardSeesTheRecordItWouldBeWrittenOver(t *testing.T) {
	errSpent := errors.New("holds spent")
	var seen []string
	table, err := jobBuilder().
		Count("restarts", Work, Hold).
		Guard(Work, Hold, func(_ context.Context, c transition.Change[Job], rec transition.View) error {
			require.True(t, rec.Exists())
			owner, _ := rec.Meta("owner")
			seen = append(seen, owner)
			copied := rec.Record()
			copied.Meta["owner"] = "mallory" // the guard's own copy
			n, err := rec.Count("restarts")
			if err != nil {
				return err
			}
			if n.Total() >= 2 {
				return errSpent
			}
			return nil
		}).Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	p, err := transition.NewPersisted(table, store, "ex-1", transition.PersistedOptions{Clock: fixedClock()})
	require.NoError(t, err)
	_, err = p.Create(bg, transition.Update[Job]{To: Work, Meta: map[string]string{"owner": "alice"}})
	require.NoError(t, err)
	for range 2 {
		_, err = p.Fire(bg, Hold, "")
		require.NoError(t, err)
		_, err = p.Fire(bg, Work, "")
		require.NoError(t, err)
	}
	_, err = p.Fire(bg, Hold, "")
	require.ErrorIs(t, err, transition.ErrGuard)
	require.ErrorIs(t, err, errSpent)
	require.GreaterOrEqual(t, len(seen), 3, "once a Fire, and again when a veto is checked on a fresh read")
	require.NotContains(t, seen, "mallory", "no guard's copy leaked into the record another saw")
	require.Equal(t, "alice", mustGet(t, store).Meta["owner"], "the copy was the guard's")

}

func TestAMachinesGuardSeesNoRecord(t *testing.T) {
	var view transition.View
	table, err := jobBuilder().Guard(Work, Hold, func(_ context.Context, _ transition.Change[Job], rec transition.View) error {
		view = rec
		return nil
	}).Build()
	require.NoError(t, err)
	m, err := transition.NewMachineAt(table, Work, transition.MachineOptions{})
	require.NoError(t, err)
	_, err = m.Fire(bg, Hold, "")
	require.NoError(t, err)
	require.False(t, view.Exists())
	_, ok := view.Meta("owner")
	require.False(t, ok)
	c, err := view.Count("restarts")
	require.NoError(t, err)
	require.Zero(t, c.Total())
	require.Equal(t, storage.Record{}, view.Record())
}

// A custom resource's zero value reads as its first phase; every write
// stores the state's own name.
func TestAnAliasReadsAsItsStateAndIsNeverWritten(t *testing.T) {
	table, err := jobBuilder().Alias(Queued, "", "pending").Build()
	require.NoError(t, err)
	for _, name := range []string{"", "pending", "queued"} {
		s, err := table.Parse(name)
		require.NoError(t, err, "%q", name)
		require.Equal(t, Queued, s)
	}
	require.Equal(t, []string{"", "pending"}, table.Aliases(Queued))
	require.Empty(t, table.Aliases(Work))
	name, _ := table.Name(Queued)
	require.Equal(t, "queued", name)

	d := table.Describe()
	require.Equal(t, []transition.Alias{{Name: "", State: "queued"}, {Name: "pending", State: "queued"}}, d.Aliases)
	rebuilt, err := transition.Rebuild(d)
	require.NoError(t, err)
	s, err := rebuilt.Parse("")
	require.NoError(t, err)
	require.Equal(t, "queued", s)
	d.Aliases = append(d.Aliases, transition.Alias{Name: "x", State: "gone"})
	_, err = transition.Rebuild(d)
	require.ErrorIs(t, err, transition.ErrInvalidDescription)

	_, err = jobBuilder().Alias(Queued, "working").Alias(Work, "pending").Alias(Hold, "pending").Alias(Job("nowhere"), "x").Build()
	var be *transition.BuildError
	require.ErrorAs(t, err, &be)
	require.Equal(t, []string{
		`alias "working" of queued is the text form of working`,
		`alias "pending" is given to working and held`,
		"alias for nowhere, an unknown state",
	}, be.Problems)
}

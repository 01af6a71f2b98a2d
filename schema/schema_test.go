package schema_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

func jobs(t testing.TB, withMoving bool) *recovery.Roles[string] {
	return schematest.Jobs(t, withMoving)
}

func TestADocumentRoundTripsAndRebuilds(t *testing.T) {
	d, err := schema.Describe("teraslice", teraslice.Roles())
	require.NoError(t, err)
	data, err := d.Encode()
	require.NoError(t, err)
	require.Contains(t, string(data), "\n  \"name\": \"teraslice\"", "indented, for people")
	back, err := schema.Decode(data)
	require.NoError(t, err)
	require.Equal(t, d, back)
	table, roles, err := back.Rebuild()
	require.NoError(t, err)
	require.True(t, table.Allowed("running", "relocating"))
	relocating, ok := roles.Relocating()
	require.True(t, ok)
	require.Equal(t, "relocating", relocating)
}

func TestADocumentNoTableCanBeRebuiltFromIsRefused(t *testing.T) {
	d, err := schema.Describe("teraslice", teraslice.Roles())
	require.NoError(t, err)
	good, err := d.Encode()
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(good, &doc))
	for name, data := range map[string]string{
		"empty":           "",
		"not JSON":        "table",
		"another format":  strings.Replace(string(good), `"format": 2`, `"format": 3`, 1),
		"unknown field":   strings.Replace(string(good), `"format": 2`, `"format": 2, "color": "red"`, 1),
		"trailing data":   string(good) + "{}",
		"no name":         strings.Replace(string(good), `"name": "teraslice"`, `"name": ""`, 1),
		"a state missing": strings.Replace(string(good), `"failed": "failed"`, `"failed": "gone"`, 1),
	} {
		_, err := schema.Decode([]byte(data))
		require.ErrorIs(t, err, schema.ErrInvalidDocument, name)
	}
	_, err = schema.Describe("", teraslice.Roles())
	require.ErrorIs(t, err, schema.ErrInvalidDocument)
	_, err = schema.Describe[string]("x", nil)
	require.ErrorIs(t, err, schema.ErrInvalidDocument)
}

// The seed's own case: a table that adds relocating under live records
// is the next version; the same table again writes nothing; an older
// controller recording its table after the newer one runs with it.
func TestAddingAStatusIsTheNextVersion(t *testing.T) {
	store := storage.NewMemory()
	v1, err := schema.Save(bg, store, "render-jobs", jobs(t, false))
	require.NoError(t, err)
	require.Equal(t, 1, v1.Version)
	_, rev1, err := store.Table(bg)
	require.NoError(t, err)

	again, err := schema.Save(bg, store, "render-jobs", jobs(t, false))
	require.NoError(t, err)
	require.Equal(t, 1, again.Version)
	_, rev, err := store.Table(bg)
	require.NoError(t, err)
	require.Equal(t, rev1, rev, "the same table writes nothing")

	v2, err := schema.Save(bg, store, "render-jobs", jobs(t, true))
	require.NoError(t, err)
	require.Equal(t, 2, v2.Version)
	require.Equal(t, []schema.Version{{Version: 1, States: v1.Table.States}}, v2.Earlier)
	version, known := v2.Knows("moving")
	require.True(t, known)
	require.Equal(t, 2, version)
	_, known = v2.Knows("melted")
	require.False(t, known)

	old, err := schema.Save(bg, store, "render-jobs", jobs(t, false))
	require.NoError(t, err, "an older controller during a rolling upgrade runs")
	require.Equal(t, 2, old.Version, "and is told the recorded table")
	loaded, err := schema.Load(bg, store)
	require.NoError(t, err)
	require.Equal(t, v2, loaded)
}

// A table that removes a status records are in, or changes a role, is
// refused, naming each difference and how many records are in the removed
// status; nothing is written.
func TestATableThatCouldStrandARecordIsRefused(t *testing.T) {
	store := storage.NewMemory()
	_, err := schema.Save(bg, store, "render-jobs", jobs(t, true))
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		rec := storageRecord(id, "moving")
		_, err := store.Create(bg, rec)
		require.NoError(t, err)
	}
	_, rev, err := store.Table(bg)
	require.NoError(t, err)

	_, err = schema.Save(bg, store, "render-jobs", jobs(t, false))
	require.NoError(t, err, "v1 is an older version of the recorded v2: allowed, as in a rolling upgrade")

	renamed := renamedMoving(t)
	_, err = schema.Save(bg, store, "render-jobs", renamed)
	require.ErrorIs(t, err, schema.ErrIncompatible)
	var inc *schema.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.Equal(t, map[string]int{"moving": 2}, inc.InStatus)
	require.ErrorContains(t, err, "status removed: moving (2 records in it)")
	require.ErrorContains(t, err, "move removed: rendering → moving")
	_, after, err := store.Table(bg)
	require.NoError(t, err)
	require.Equal(t, rev, after, "nothing written")

	_, err = schema.Save(bg, store, "ci-jobs", jobs(t, true))
	require.ErrorIs(t, err, schema.ErrIncompatible)
	require.ErrorContains(t, err, `keeps table "render-jobs"`)
}

func renamedMoving(t testing.TB) *recovery.Roles[string] { return schematest.Renamed(t) }

func storageRecord(id, status string) storage.Record {
	return storage.Record{ID: id, Status: status}
}

// A store that cannot keep a table says so.
func TestAStoreWithoutATableKeeperIsNamed(t *testing.T) {
	var store struct{ storage.Store }
	store.Store = storage.NewMemory()
	_, err := schema.Save(bg, store, "render-jobs", jobs(t, false))
	require.ErrorIs(t, err, schema.ErrNotKept)
	_, err = schema.Load(bg, store)
	require.ErrorIs(t, err, schema.ErrNotKept)
	_, err = schema.Load(bg, storage.NewMemory())
	require.ErrorIs(t, err, schema.ErrNoTable)
}

func FuzzDecode(f *testing.F) {
	d, _ := schema.Describe("teraslice", teraslice.Roles())
	good, _ := d.Encode()
	f.Add(good)
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := schema.Decode(data)
		if err != nil {
			require.ErrorIs(t, err, schema.ErrInvalidDocument)
			return
		}
		// Whatever decodes rebuilds and survives another round trip.
		_, _, err = d.Rebuild()
		require.NoError(t, err)
		again, err := d.Encode()
		require.NoError(t, err)
		back, err := schema.Decode(again)
		require.NoError(t, err)
		require.Equal(t, d, back)
	})
}

// Renaming moving to relocating under records in moving: with a
// migration mapping one to the other, each record is moved (its trail
// says by whom and why) and the new table recorded; without a mapping for
// every removed status, nothing is written.
func TestAMigrationMovesTheRecordsThenRecordsTheTable(t *testing.T) {
	store := storage.NewMemory()
	v2, err := schema.Save(bg, store, "render-jobs", jobs(t, true))
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err := store.Create(bg, storageRecord(id, "moving"))
		require.NoError(t, err)
	}
	_, err = store.Create(bg, storageRecord("c", "rendering"))
	require.NoError(t, err)

	_, _, err = schema.SaveMigrating(bg, store, "render-jobs", renamedMoving(t), schema.Migration{Reason: "moving is relocating now"})
	require.ErrorIs(t, err, schema.ErrMigration)
	require.ErrorContains(t, err, "status moving is removed")
	_, _, err = schema.SaveMigrating(bg, store, "render-jobs", renamedMoving(t), schema.Migration{Statuses: map[string]string{"moving": "gone"}, Reason: "x"})
	require.ErrorContains(t, err, "which the new table does not have")
	rec, err := store.Get(bg, "a")
	require.NoError(t, err)
	require.Equal(t, "moving", rec.Status, "nothing written")

	d, moved, err := schema.SaveMigrating(bg, store, "render-jobs", renamedMoving(t),
		schema.Migration{Statuses: map[string]string{"moving": "relocating"}, Reason: "moving is relocating now", Actor: "ops"})
	require.NoError(t, err)
	require.Equal(t, v2.Version+1, d.Version)
	require.ElementsMatch(t, []string{"a", "b"}, moved)
	for _, id := range []string{"a", "b"} {
		rec, err := store.Get(bg, id)
		require.NoError(t, err)
		require.Equal(t, "relocating", rec.Status)
		last, _ := rec.History.Last()
		require.Equal(t, storage.Entry{From: "moving", To: "relocating", Reason: "moving is relocating now", Actor: "ops",
			At: last.At, Revision: last.Revision}, last)
	}
	rec, err = store.Get(bg, "c")
	require.NoError(t, err)
	require.Equal(t, "rendering", rec.Status, "records in kept statuses are not touched")
	version, known := d.Knows("moving")
	require.True(t, known, "an earlier version's status")
	require.Equal(t, v2.Version, version)
}

// A record a live controller holds is never migrated under it.
func TestAMigrationLeavesAHeldRecordAndRecordsNothing(t *testing.T) {
	store := storage.NewMemory()
	_, err := schema.Save(bg, store, "render-jobs", jobs(t, true))
	require.NoError(t, err)
	_, err = store.Create(bg, storageRecord("a", "moving"))
	require.NoError(t, err)
	own, _, err := store.Acquire(bg, "a", storage.Lease{Holder: "pod-1"})
	require.NoError(t, err)
	defer own.Release(bg)
	_, _, err = schema.SaveMigrating(bg, store, "render-jobs", renamedMoving(t),
		schema.Migration{Statuses: map[string]string{"moving": "relocating"}, Reason: "renamed"})
	require.ErrorIs(t, err, schema.ErrMigration)
	require.ErrorIs(t, err, storage.ErrHeld)
	d, err := schema.Load(bg, store)
	require.NoError(t, err)
	require.Equal(t, 1, d.Version, "the new table is not recorded")
}

// The operator's trial: version 3 renamed quarantined held and relocated
// three held jobs; version 2 after it was refused with "held (0 records
// in it)" while the three waited in migrating to return to held. They
// use held, and a migration back to version 2 maps their previous status,
// so that version 2's controllers resume them quarantined.
func TestARollbackCountsAndMigratesTheRecordsReturningToARemovedStatus(t *testing.T) {
	store := storage.NewMemory()
	v1, v2, v3 := schematest.CIJobs(t, ""), schematest.CIJobs(t, "quarantined"), schematest.CIJobs(t, "held")
	_, err := schema.Save(bg, store, "ci-jobs", v1)
	require.NoError(t, err)
	_, err = schema.Save(bg, store, "ci-jobs", v2)
	require.NoError(t, err)
	_, _, err = schema.SaveMigrating(bg, store, "ci-jobs", v3,
		schema.Migration{Statuses: map[string]string{"quarantined": "held"}, Reason: "quarantined is held now"})
	require.NoError(t, err)
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		master, err := transition.NewPersisted(v3.Table(), store, id, transition.PersistedOptions{Actor: "master"})
		require.NoError(t, err)
		_, err = master.Create(bg, transition.To("queued"))
		require.NoError(t, err)
		_, err = master.Walk(bg, "held", "held by an operator")
		require.NoError(t, err)
		_, err = master.Fire(bg, "migrating", "its node drained")
		require.NoError(t, err)
	}

	_, err = schema.Save(bg, store, "ci-jobs", v2)
	var inc *schema.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.ErrorContains(t, err, "status removed: held (0 records in it, 3 records with it as their previous status)")

	d, moved, err := schema.SaveMigrating(bg, store, "ci-jobs", v2,
		schema.Migration{Statuses: map[string]string{"held": "quarantined"}, Reason: "back to version 2"})
	require.NoError(t, err)
	require.Equal(t, 4, d.Version)
	require.Equal(t, []string{"job-1", "job-2", "job-3"}, moved)
	exec, err := transition.NewPersisted(v2.Table(), store, "job-1", transition.PersistedOptions{Actor: "ctl-v2"})
	require.NoError(t, err)
	dec, err := recovery.NewDecider(v2, recovery.Policy{})
	require.NoError(t, err)
	v, err := dec.Start(bg, exec, storage.Lease{Holder: "ctl-v2"})
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, "quarantined", v.To)
}

// A controller finds the version it serves in the recorded document: the
// newest with its states, whether it is the recorded one or an older
// controller's during a rolling upgrade or after a rollback.
func TestAControllerFindsTheVersionItServes(t *testing.T) {
	store := storage.NewMemory()
	describe := func(parked string) schema.Document {
		d, err := schema.Describe("ci-jobs", schematest.CIJobs(t, parked))
		require.NoError(t, err)
		return d
	}
	_, err := schema.Save(bg, store, "ci-jobs", schematest.CIJobs(t, ""))
	require.NoError(t, err)
	_, err = schema.Save(bg, store, "ci-jobs", schematest.CIJobs(t, "quarantined"))
	require.NoError(t, err)
	d, _, err := schema.SaveMigrating(bg, store, "ci-jobs", schematest.CIJobs(t, "held"),
		schema.Migration{Statuses: map[string]string{"quarantined": "held"}, Reason: "renamed"})
	require.NoError(t, err)
	for parked, want := range map[string]int{"": 1, "quarantined": 2, "held": 3} {
		v, ok := d.VersionOf(describe(parked))
		require.True(t, ok, parked)
		require.Equal(t, want, v, parked)
	}
	_, ok := d.VersionOf(describe("frozen"))
	require.False(t, ok, "a table no version has")
	other, err := schema.Describe("render-jobs", jobs(t, true))
	require.NoError(t, err)
	_, ok = d.VersionOf(other)
	require.False(t, ok, "another lifecycle")
}

// A document a build of format 1 recorded (one relocating and one
// stopping state, named by plain strings) reads as this build's, and
// rebuilds the same roles.
func TestADocumentOfFormatOneIsRead(t *testing.T) {
	d, err := schema.Describe("teraslice", teraslice.Roles())
	require.NoError(t, err)
	data, err := d.Encode()
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	doc["format"] = 1
	roles := doc["roles"].(map[string]any)
	roles["relocating"], roles["restart"] = "relocating", "initializing"
	roles["stopping"], roles["stopped"] = "stopping", "stopped"
	roles["deadlines"] = roles["timers"] // format 1's deadlines are timers from entry
	delete(roles, "timers")
	v1, err := json.Marshal(doc)
	require.NoError(t, err)

	read, err := schema.Decode(v1)
	require.NoError(t, err)
	require.Equal(t, d, read, "upgraded to this build's format")
	_, err = schema.Decode([]byte(strings.Replace(string(v1), `"restart":"initializing"`, `"restart":"initializing","parked":["x"]`, 1)))
	require.ErrorIs(t, err, schema.ErrInvalidDocument, "format 1 has no parked states")
}

// Package schematest runs the recorded table's compatibility rules
// against a store: every store that implements storage.TableKeeper runs
// it, as every store runs storagetest.
package schematest

import (
	"context"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// Run runs every compatibility case against stores made by newStore,
// each with a fresh, empty store that implements storage.TableKeeper and
// storage.Lister.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, storage.Store)
	}{
		{"TheSameTableWritesNothing", sameTableWritesNothing},
		{"AnAddedStatusIsTheNextVersion", addedStatusIsTheNextVersion},
		{"AnOlderVersionGetsTheRecordedTable", olderVersionGetsTheRecordedTable},
		{"ARemovedStatusIsRefusedWithItsRecordsCounted", removedStatusIsRefused},
		{"AMigrationMovesTheRecordsThenRecords", migrationMovesTheRecords},
		{"AStatusARecordEnteredFromIsInUse", previousStatusIsInUse},
		{"AMigrationMapsPreviousStatusesToo", migrationMapsPreviousStatuses},
		{"AStatusOutsideEveryVersionIsKnownToNone", statusOutsideEveryVersion},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var bg = context.Background()

// Jobs returns the roles of a render job's table: version 1 without a
// relocating state, version 2 (withMoving) with moving, as Teraslice
// added relocating.
func Jobs(t testing.TB, withMoving bool) *recovery.Roles[string] {
	t.Helper()
	return jobs(t, withMoving, "moving")
}

// CIJobs returns the roles of a CI job's table, as an operator's trial
// ran three versions of it on one store: version 1 with parked empty;
// version 2 with parked "quarantined", a second running state a
// relocation (migrating) returns to; version 3 with it renamed "held".
func CIJobs(t testing.TB, parked string) *recovery.Roles[string] {
	t.Helper()
	running := []string{"running"}
	b := transition.New("queued").
		Allow("queued", "starting", "draining", "cancelled").
		Allow("starting", "running", "draining", "failed").
		Allow("running", "migrating", "draining", "passed", "failed", "cancelled").
		Allow("migrating", "starting", "draining", "failed").
		Allow("draining", "cancelled", "passed", "failed").
		Terminal("passed", "failed", "cancelled")
	if parked != "" {
		running = append(running, parked)
		b.Allow("running", parked).Allow(parked, "running", "migrating", "draining", "passed", "failed", "cancelled")
	}
	table, err := b.Return("migrating", running...).Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted("queued", "starting").Running(running...).
		Relocating("migrating", "starting").Stopping("draining", "cancelled").
		Deadline("migrating", 15*time.Minute, "failed").Deadline("draining", 5*time.Minute, "cancelled").
		Failed("failed").Ends("passed", "cancelled").Build()
	require.NoError(t, err)
	return roles
}

// Renamed is version 2 with moving renamed relocating.
func Renamed(t testing.TB) *recovery.Roles[string] {
	t.Helper()
	return jobs(t, true, "relocating")
}

func jobs(t testing.TB, relocates bool, relocating string) *recovery.Roles[string] {
	running := []string{"rendering", "paused"}
	b := transition.New("queued").
		Allow("queued", "rendering", "cancelling", "failed").
		Allow("rendering", "paused", "cancelling", "done", "failed", "cancelled").
		Allow("paused", "rendering", "cancelling", "done", "failed", "cancelled").
		Allow("cancelling", "cancelled", "done", "failed").
		Terminal("done", "failed", "cancelled")
	if relocates {
		b.Allow("rendering", relocating).Allow("paused", relocating).Return(relocating, running...).Allow(relocating, "queued", "cancelling", "failed")
	}
	table, err := b.Build()
	require.NoError(t, err)
	rb := recovery.DefineRoles(table).NotStarted("queued").Running(running...).
		Stopping("cancelling", "cancelled").Failed("failed").Ends("done", "cancelled")
	if relocates {
		rb.Relocating(relocating, "queued")
	}
	roles, err := rb.Build()
	require.NoError(t, err)
	return roles
}

// in creates records in status, by id.
func in(t *testing.T, s storage.Store, status string, ids ...string) {
	t.Helper()
	from(t, s, status, "", ids...)
}

// from creates records in status, entered from previous, by id.
func from(t *testing.T, s storage.Store, status, previous string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		rec := storagetest.Sample(id)
		rec.Status, rec.Previous, rec.Owner, rec.Epoch = status, previous, "", 0
		_, err := s.Create(bg, rec)
		require.NoError(t, err)
	}
}

func tableRevision(t *testing.T, s storage.Store) uint64 {
	t.Helper()
	_, rev, err := s.(storage.TableKeeper).Table(bg)
	require.NoError(t, err)
	return rev
}

func sameTableWritesNothing(t *testing.T, s storage.Store) {
	v1, err := schema.Save(bg, s, "render-jobs", Jobs(t, false))
	require.NoError(t, err)
	require.Equal(t, 1, v1.Version)
	rev := tableRevision(t, s)
	again, err := schema.Save(bg, s, "render-jobs", Jobs(t, false))
	require.NoError(t, err)
	require.Equal(t, v1, again)
	require.Equal(t, rev, tableRevision(t, s))
}

func addedStatusIsTheNextVersion(t *testing.T, s storage.Store) {
	v1, err := schema.Save(bg, s, "render-jobs", Jobs(t, false))
	require.NoError(t, err)
	in(t, s, "rendering", "job-1")
	v2, err := schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	require.Equal(t, 2, v2.Version)
	require.Equal(t, []schema.Version{{Version: 1, States: v1.Table.States}}, v2.Earlier)
	loaded, err := schema.Load(bg, s)
	require.NoError(t, err)
	require.Equal(t, v2, loaded)
}

func olderVersionGetsTheRecordedTable(t *testing.T, s storage.Store) {
	_, err := schema.Save(bg, s, "render-jobs", Jobs(t, false))
	require.NoError(t, err)
	v2, err := schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	rev := tableRevision(t, s)
	old, err := schema.Save(bg, s, "render-jobs", Jobs(t, false))
	require.NoError(t, err)
	require.Equal(t, v2, old)
	require.Equal(t, rev, tableRevision(t, s), "nothing written")
}

func removedStatusIsRefused(t *testing.T, s storage.Store) {
	_, err := schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	in(t, s, "moving", "job-1", "job-2")
	rev := tableRevision(t, s)
	_, err = schema.Save(bg, s, "render-jobs", Renamed(t))
	var inc *schema.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.ErrorIs(t, err, schema.ErrIncompatible)
	require.Equal(t, map[string]int{"moving": 2}, inc.InStatus)
	require.Equal(t, rev, tableRevision(t, s), "nothing written")
	rec, err := s.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, "moving", rec.Status)
}

func migrationMovesTheRecords(t *testing.T, s storage.Store) {
	v, err := schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	in(t, s, "moving", "job-1")
	in(t, s, "rendering", "job-2")
	d, moved, err := schema.SaveMigrating(bg, s, "render-jobs", Renamed(t),
		schema.Migration{Statuses: map[string]string{"moving": "relocating"}, Reason: "moving is relocating now"})
	require.NoError(t, err)
	require.Equal(t, v.Version+1, d.Version)
	require.Equal(t, []string{"job-1"}, moved)
	rec, err := s.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, "relocating", rec.Status)
	last, ok := rec.History.Last()
	require.True(t, ok)
	require.Equal(t, "moving", last.From)
	require.Equal(t, "moving is relocating now", last.Reason)
	rec, err = s.Get(bg, "job-2")
	require.NoError(t, err)
	require.Equal(t, "rendering", rec.Status)
}

// A removed status is in use while a record has it as its previous
// status: a relocating record returns there.
func previousStatusIsInUse(t *testing.T, s storage.Store) {
	_, err := schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	from(t, s, "rendering", "moving", "job-1")
	from(t, s, "paused", "moving", "job-2")
	rev := tableRevision(t, s)
	_, err = schema.Save(bg, s, "render-jobs", Renamed(t))
	var inc *schema.IncompatibleError
	require.ErrorAs(t, err, &inc)
	require.Equal(t, map[string]int{"moving": 0}, inc.InStatus)
	require.Equal(t, map[string]int{"moving": 2}, inc.InPrevious)
	require.Contains(t, err.Error(), "status removed: moving (0 records in it, 2 records with it as their previous status)")
	require.Contains(t, err.Error(), "schema.SaveMigrating", "the refusal names the way on")
	require.Equal(t, rev, tableRevision(t, s), "nothing written")
}

// A migration leaves no record using a removed status: a moved record
// keeps the status it was entered from (mapped, if it is removed too),
// and a record whose previous status alone is removed has it mapped.
func migrationMapsPreviousStatuses(t *testing.T, s storage.Store) {
	v, err := schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	from(t, s, "moving", "paused", "job-1")
	from(t, s, "rendering", "moving", "job-2")
	from(t, s, "paused", "rendering", "job-3")
	before, err := s.Get(bg, "job-3")
	require.NoError(t, err)
	d, moved, err := schema.SaveMigrating(bg, s, "render-jobs", Renamed(t),
		schema.Migration{Statuses: map[string]string{"moving": "relocating"}, Reason: "moving is relocating now"})
	require.NoError(t, err)
	require.Equal(t, v.Version+1, d.Version)
	require.Equal(t, []string{"job-1", "job-2"}, moved)

	rec, err := s.Get(bg, "job-1")
	require.NoError(t, err)
	require.Equal(t, "relocating", rec.Status)
	require.Equal(t, "paused", rec.Previous, "a relocation renamed still returns where it left")

	rec, err = s.Get(bg, "job-2")
	require.NoError(t, err)
	require.Equal(t, "rendering", rec.Status)
	require.Equal(t, "relocating", rec.Previous)
	last, ok := rec.History.Last()
	require.True(t, ok)
	require.Equal(t, storage.Entry{From: "rendering", To: "rendering", Reason: "moving is relocating now (its previous status moving is relocating now)",
		Actor: "schema-migration", At: last.At, Revision: last.Revision}, last)

	after, err := s.Get(bg, "job-3")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "a record that uses no removed status is not written")
}

func statusOutsideEveryVersion(t *testing.T, s storage.Store) {
	_, err := schema.Save(bg, s, "render-jobs", Jobs(t, false))
	require.NoError(t, err)
	in(t, s, "rendering", "job-1")
	_, err = schema.Save(bg, s, "render-jobs", Jobs(t, true))
	require.NoError(t, err)
	in(t, s, "moving", "job-2")
	in(t, s, "melted", "job-3")
	l, err := schema.List(bg, s)
	require.NoError(t, err)
	require.Equal(t, 2, l.Table.Version)
	var known, foreign []string
	for _, r := range l.Known {
		known = append(known, r.ID)
	}
	for _, r := range l.Foreign {
		foreign = append(foreign, r.ID)
	}
	require.Equal(t, []string{"job-1", "job-2"}, known)
	require.Equal(t, []string{"job-3"}, foreign, "a status no version knows is listed apart")
}

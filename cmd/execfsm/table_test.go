package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// ciJobs is a user's own lifecycle: a CI job's. draining is its stopping
// status (cancelled what a stop ends in), migrating its relocating one.
func ciJobs(t testing.TB) *recovery.Roles[string] {
	t.Helper()
	table, err := transition.New("queued").
		Allow("queued", "starting", "cancelled", "failed").
		Allow("starting", "running", "draining", "failed").
		Allow("running", "draining", "migrating", "succeeded", "failed", "cancelled").
		Return("migrating", "running").
		Allow("migrating", "queued", "draining", "failed").
		Allow("draining", "cancelled", "succeeded", "failed").
		Terminal("succeeded", "failed", "cancelled").
		Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted("queued", "starting").Running("running").
		Relocating("migrating", "queued").Stopping("draining", "cancelled").Failed("failed").
		Ends("succeeded", "cancelled").Build()
	require.NoError(t, err)
	return roles
}

// populateCIJobs records the table and makes job-1 running, job-2
// succeeded and job-3 queued.
func populateCIJobs(t *testing.T, store storage.Store) {
	t.Helper()
	roles := ciJobs(t)
	_, err := schema.Save(bg, store, "ci-jobs", roles)
	require.NoError(t, err)
	for id, to := range map[string]string{"job-1": "running", "job-2": "succeeded", "job-3": "queued"} {
		exec, err := transition.NewPersisted(roles.Table(), store, id, transition.PersistedOptions{Actor: "ci-master"})
		require.NoError(t, err)
		_, err = exec.Create(bg, transition.To("queued").Because("pushed"))
		require.NoError(t, err)
		_, err = exec.Walk(bg, to, "on its way")
		require.NoError(t, err)
	}
}

// customTable runs the user-table scenario against a store: the CLI
// lists, draws and stops by the table the store records, and never
// writes a status outside it.
func customTable(t *testing.T, store []string, get func(id string) storage.Record) {
	t.Helper()
	r := execfsm(t, append(store, "list", "--status", "draining,migrating")...)
	require.Equal(t, 0, r.code, r.stderr)
	r = execfsm(t, append(store, "list", "--status", "stopping")...)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `"stopping" is not a status of table ci-jobs (version 1)`)

	r = execfsm(t, append(store, "diagram")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "migrating")
	require.Contains(t, r.stdout, "draining")
	require.NotContains(t, r.stdout, "relocating", "the recorded table, not Teraslice's")

	r = execfsm(t, append(store, "stop", "job-1", "--reason", "flaky runner", "--actor", "operator:ana")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "job-1: running → draining")
	require.Equal(t, "draining", get("job-1").Status, "the table's stopping status, never the built-in one")

	before := get("job-2")
	r = execfsm(t, append(store, "stop", "job-2", "--reason", "x")...)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "succeeded → draining: transition not allowed")
	require.Equal(t, before, get("job-2"), "nothing written")

	r = execfsm(t, append(store, "list", "-o", "json")...)
	require.Equal(t, 0, r.code, r.stderr)
	var listed struct{ Items, Foreign []storage.Record }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed), "-o after the command, as kubectl users type it")
	var ids []string
	for _, rec := range append(listed.Items, listed.Foreign...) {
		ids = append(ids, rec.ID)
	}
	require.Subset(t, ids, []string{"job-1", "job-2", "job-3"})
}

// The user-table scenario on a bbolt file, beside a namespace that
// records no table: that one is read, and never written.
func TestACustomTableIsReadFromABoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ci.db")
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	ci, err := db.Store("ci")
	require.NoError(t, err)
	populateCIJobs(t, ci)
	weird := storagetest.Sample("job-4")
	weird.Status = "paused-by-hand"
	_, err = ci.Create(bg, weird)
	require.NoError(t, err)
	legacy, err := db.Store("legacy")
	require.NoError(t, err)
	_, err = legacy.Create(bg, storagetest.Sample("old-1"))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	get := func(namespace string) func(id string) storage.Record {
		return func(id string) storage.Record {
			t.Helper()
			db, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
			require.NoError(t, err)
			defer db.Close()
			s, err := db.Store(namespace)
			require.NoError(t, err)
			rec, err := s.Get(bg, id)
			require.NoError(t, err)
			return rec
		}
	}
	r := execfsm(t, "--bolt", path, "--namespace", "ci", "list")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Contains(t, lines[len(lines)-1], "job-4", "a status no version knows is listed apart, last")
	require.Contains(t, lines[len(lines)-1], "paused-by-hand (not in table ci-jobs)")
	r = execfsm(t, "--bolt", path, "--namespace", "ci", "-o", "json", "list")
	require.Equal(t, 0, r.code, r.stderr)
	var listed struct{ Items, Foreign []storage.Record }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	require.Len(t, listed.Foreign, 1)
	require.Equal(t, "job-4", listed.Foreign[0].ID)
	r = execfsm(t, "--bolt", path, "--namespace", "ci", "get", "job-4")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "paused-by-hand (not a status of table ci-jobs, version 1)")
	r = execfsm(t, "--bolt", path, "--namespace", "ci", "stop", "job-4", "--reason", "x")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "so it is left alone")

	customTable(t, []string{"--bolt", path, "--namespace", "ci"}, get("ci"))

	// A namespace that records no table: read, never written.
	r = execfsm(t, "--bolt", path, "--namespace", "legacy", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "old-1")
	before := get("legacy")("old-1")
	r = execfsm(t, "--bolt", path, "--namespace", "legacy", "stop", "old-1", "--reason", "x")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "the store records no table")
	require.Equal(t, before, get("legacy")("old-1"))

	// Without --namespace, on a file without the default one: its
	// namespaces are named.
	for _, args := range [][]string{{"list"}, {"stop", "job-1", "--reason", "x"}} {
		r = execfsm(t, append([]string{"--bolt", path}, args...)...)
		require.Equal(t, exitFailed, r.code, "%v", args)
		require.Contains(t, r.stderr, `has no namespace "executions"; it holds ci, legacy: give --namespace`)
	}
}

// getter reads records from store for customTable's checks.
func getter(t *testing.T, store storage.Store) func(id string) storage.Record {
	return func(id string) storage.Record {
		t.Helper()
		rec, err := store.Get(bg, id)
		require.NoError(t, err)
		return rec
	}
}

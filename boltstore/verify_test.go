package boltstore_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// Verified in the background, a sound file opens and takes writes as
// usual; a controller killed meanwhile loses none: its log is replayed.
func TestAFileVerifiedInTheBackgroundTakesWritesAndSurvivesACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "good")
	writeBranched(t, path)
	db, s := openStore(t, path, boltstore.Options{VerifyInBackground: true})
	rec, err := s.Create(bg, storagetest.Sample("ex-new"))
	require.NoError(t, err)
	recs, _, err := s.List(bg)
	require.NoError(t, err)
	require.Len(t, recs, 301)
	db.Crash()

	_, again := openStore(t, path, boltstore.Options{})
	got, err := again.Get(bg, "ex-new")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "the write acknowledged before the walk passed is in the log")
}

// A file damaged where only the walk looks (a leaf of the records, whose
// meta pages are sound) opens when verified in the background; the walk
// finds the damage and stops every write, and what was acknowledged
// before stays in the log, never written into the damaged file. Opened
// again as usual, the file is refused.
func TestADamagedFileVerifiedInTheBackgroundStopsItsWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "good")
	writeBranched(t, path)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	le := binary.LittleEndian
	f, root := recordsRoot(t, good)
	leaf := le.Uint64(f.page(root)[16+8:])
	damaged := bytes.Clone(good)
	le.PutUint64(boltFile{data: damaged, pageSize: f.pageSize}.page(leaf)[0:], leaf+1) // a page whose header names another
	require.NoError(t, os.WriteFile(path, damaged, 0o600))

	db, err := boltstore.Open(path, boltstore.Options{VerifyInBackground: true})
	require.NoError(t, err, "the meta pages are sound")
	s, err := db.Store("executions")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := s.Create(bg, storagetest.Sample("ex-late"))
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the walk to find the damage and stop the writes")
	_, err = s.Create(bg, storagetest.Sample("ex-later"))
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "verifying the file")
	require.Error(t, db.Close(), "the log is not applied to a damaged file")

	_, err = boltstore.Open(path, boltstore.Options{})
	require.ErrorIs(t, err, storage.ErrCorrupt, "opened as usual, the file is refused")
}

package boltstore_test

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/stretchr/testify/require"
)

// childRemovedLog writes ten records, says "acked", waits for SIGUSR1
// (the test removes the log meanwhile), then finds the
// removal the way BOLTSTORE_DETECT says (a write, or Check), says what it
// was told, and waits to be killed.
func childRemovedLog(path string) int {
	db, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := db.Store("executions")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for k := range 10 {
		if _, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	goAhead := make(chan os.Signal, 1)
	signal.Notify(goAhead, syscall.SIGUSR1)
	fmt.Println("acked")
	select {
	case <-goAhead:
	case <-time.After(time.Minute):
		return 1
	}
	switch os.Getenv("BOLTSTORE_DETECT") {
	case "write":
		_, err = s.Create(bg, storagetest.Sample("ex-10"))
	case "check":
		err = db.Check()
	}
	fmt.Println("found:", strings.ReplaceAll(fmt.Sprint(err), "\n", " "))
	time.Sleep(time.Minute) // killed before it ends
	return 0
}

// The operator's trial: `rm db.wal-*` while a controller runs, then a
// SIGKILL, lost every write acknowledged before the removal (10 of 10):
// they were in memory and in the removed segment, Open refused the file
// and InspectLog named none of them. Found by a write or by Check, the
// removal now has every acknowledged write applied to the file at once:
// after the SIGKILL the file opens with all of them, and its log has
// nothing to drop.
func TestARemovedLiveLogLosesNoAcknowledgedWriteToASIGKILL(t *testing.T) {
	for _, detect := range []string{"write", "check"} {
		t.Run("found by a "+detect, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			cmd, out := child(t, "removed-log", path, "BOLTSTORE_DETECT="+detect)
			hung := watchdog(cmd, time.Minute)
			require.True(t, out.Scan(), "the child wrote its records (hung: %v)", hung())
			require.Equal(t, "acked", out.Text())
			segs := segments(t, path)
			require.NotEmpty(t, segs)
			for _, seg := range segs {
				require.NoError(t, os.Remove(seg))
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGUSR1))
			require.True(t, out.Scan(), "the child found the removal (hung: %v)", hung())
			require.Contains(t, out.Text(), "removed or replaced while in use")
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()

			damage, err := boltstore.InspectLog(path, boltstore.Options{})
			require.NoError(t, err)
			require.Nil(t, damage, "nothing to drop")
			_, s := openStore(t, path, boltstore.Options{})
			requireRecords(t, s, 10)
		})
	}
}

// Removed with several segments of writes not yet in the file, one of
// them being applied by the checkpointer meanwhile: every acknowledged
// write is applied, oldest first, and a crash after loses none.
func TestARemovedLogOfManySegmentsIsAppliedWhole(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "db")
		db, s := openStore(t, path, boltstore.Options{})
		db.CheckpointEvery(3)
		for k := range 25 {
			_, err := s.Create(bg, storagetest.Sample(fmt.Sprint("ex-", k)))
			require.NoError(t, err)
		}
		for _, seg := range segments(t, path) {
			// The checkpointer may have applied and removed it since.
			if err := os.Remove(seg); !errors.Is(err, os.ErrNotExist) {
				require.NoError(t, err)
			}
		}
		_, err := s.Create(bg, storagetest.Sample("ex-25"))
		require.ErrorContains(t, err, "removed or replaced while in use", "round %d", round)
		db.Crash()
		_, s = openStore(t, path, boltstore.Options{})
		requireRecords(t, s, 25)
	}
}

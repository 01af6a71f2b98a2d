//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filecheck

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// A file cut short by another process while its mapping is read faults
// on the pages past its new end: the walk fails with an error, and the
// process goes on.
func TestAFileCutShortWhileMappedIsAnErrorNotACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.WriteFile(path, make([]byte, 4*os.Getpagesize()), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	mapped, unmap := mapFile(f, 4*int64(os.Getpagesize()))
	require.NotNil(t, mapped)
	defer unmap()
	require.NoError(t, os.Truncate(path, 0))
	err = walkGuarded(func() error {
		if mapped[3*os.Getpagesize()] != 0 { // past the end now: a fault
			return errors.New("read a byte the file never had")
		}
		return nil
	})
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "changed while it was read")
}

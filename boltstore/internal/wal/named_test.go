package wal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A segment's name leads to it until it is removed, replaced, renamed,
// or its directory renamed; a path that cannot be looked up at all is
// an error, not an answer.
func TestNamedSaysWhetherTheNameStillLeadsToTheSegment(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, dir, path string)
		named  bool
		err    bool
	}{
		{"untouched", func(*testing.T, string, string) {}, true, false},
		{"removed", func(t *testing.T, _, path string) { require.NoError(t, os.Remove(path)) }, false, false},
		{"renamed", func(t *testing.T, _, path string) { require.NoError(t, os.Rename(path, path+".old")) }, false, false},
		{"replaced", func(t *testing.T, dir, path string) {
			other := filepath.Join(dir, "other")
			require.NoError(t, os.WriteFile(other, []byte(Magic), 0o600))
			require.NoError(t, os.Rename(other, path))
		}, false, false},
		{"its directory renamed", func(t *testing.T, dir, _ string) { require.NoError(t, os.Rename(dir, dir+".old")) }, false, false},
		{"its directory a file now", func(t *testing.T, dir, _ string) {
			require.NoError(t, os.Rename(dir, dir+".old"))
			require.NoError(t, os.WriteFile(dir, nil, 0o600))
		}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.Mkdir(dir, 0o700))
			seg, err := CreateSegment(OS{}, filepath.Join(dir, "db"), 1, 0o600)
			require.NoError(t, err)
			t.Cleanup(func() { _ = seg.Close() })
			c.change(t, dir, seg.Path)
			named, err := OS{}.Named(seg.f, seg.Path)
			if c.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.named, named)
		})
	}
}

//go:build unix

package wal

import (
	"os"
	"syscall"
)

// sameFile reports whether name leads to the file is describes. It runs
// after every flush of the log, so it stats into a Stat_t of its own
// rather than through os.Stat, which builds a FileInfo each time.
func sameFile(name string, is os.FileInfo) (bool, error) {
	want, ok := is.Sys().(*syscall.Stat_t)
	if !ok {
		return sameFileInfo(name, is)
	}
	var at syscall.Stat_t
	err := syscall.Stat(name, &at)
	for err == syscall.EINTR {
		err = syscall.Stat(name, &at)
	}
	if err == syscall.ENOENT {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	return at.Dev == want.Dev && at.Ino == want.Ino, nil
}

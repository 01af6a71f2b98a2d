//go:build !windows && !plan9 && !solaris && !aix && !android

package filecheck

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockRetry is how often a busy lock is tried again, as bbolt does.
const lockRetry = 50 * time.Millisecond

// lockShared takes f's lock shared, the lock bbolt takes on the same
// platforms (exclusive for a writer, shared for a reader), trying until
// timeout has passed; it returns ErrLocked then. The lock keeps a writer
// in another process from changing the pages while they are read.
func lockShared(f *os.File, timeout time.Duration) (unlock func(), err error) {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err
		}
		if time.Now().Add(lockRetry).After(deadline) {
			return nil, ErrLocked
		}
		time.Sleep(lockRetry)
	}
}

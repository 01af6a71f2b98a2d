package boltstore

import (
	"errors"
	"os"
	"runtime"
)

// logFS is the file system the write-ahead log lives on: the operating
// system's, or, in the tests, one that plays a power cut (it keeps what
// was flushed, and at the cut loses or tears what was not). Every file
// operation of the log goes through it; bbolt's file does not.
type logFS interface {
	// create makes a new file, failing if name exists.
	create(name string, perm os.FileMode) (logFile, error)
	readFile(name string) ([]byte, error)
	readDir(dir string) ([]os.DirEntry, error)
	remove(name string) error
	// syncDir flushes dir, so that files created in it or removed from
	// it stay so after a crash.
	syncDir(dir string) error
	// named reports whether name still leads to the file f is.
	named(f logFile, name string) (bool, error)
}

// logFile is a log segment open for appending.
type logFile interface {
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	// datasync flushes the file's data, and its size, to the disk.
	datasync() error
	Close() error
}

// osFS is the operating system's file system.
type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) datasync() error                       { return fdatasync(f.File) }
func (osFS) readFile(name string) ([]byte, error)      { return os.ReadFile(name) }
func (osFS) readDir(dir string) ([]os.DirEntry, error) { return os.ReadDir(dir) }
func (osFS) remove(name string) error                  { return os.Remove(name) }

func (osFS) create(name string, perm os.FileMode) (logFile, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for syncing there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (osFS) named(f logFile, name string) (bool, error) {
	open, err := f.(osFile).Stat()
	if err != nil {
		return false, err
	}
	at, err := os.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(at, open), nil
}

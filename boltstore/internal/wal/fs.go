package wal

import (
	"errors"
	"os"
	"runtime"
)

// FS is the file system the write-ahead log lives on: the operating
// system's, or, in the tests, one that plays a power cut (it keeps what
// was flushed, and at the cut loses or tears what was not). Every file
// operation of the log goes through it; bbolt's file does not.
type FS interface {
	// Create makes a new file, failing if name exists.
	Create(name string, perm os.FileMode) (File, error)
	ReadFile(name string) ([]byte, error)
	ReadDir(dir string) ([]os.DirEntry, error)
	Remove(name string) error
	// SyncDir flushes dir, so that files created in it or removed from
	// it stay so after a crash.
	SyncDir(dir string) error
	// Named reports whether name still leads to the file f is.
	Named(f File, name string) (bool, error)
}

// File is a log segment open for appending.
type File interface {
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	// Datasync flushes the file's data, and its size, to the disk.
	Datasync() error
	Close() error
}

// OS is the operating system's file system.
type OS struct{}

// osFile is a segment's file and what it is (its device and inode), read
// when it is made: an open file stays the file it is, so a check of its
// name after every flush makes one stat, not two.
type osFile struct {
	*os.File
	is os.FileInfo
}

func (f *osFile) Datasync() error                    { return Fdatasync(f.File) }
func (OS) ReadFile(name string) ([]byte, error)      { return os.ReadFile(name) }
func (OS) ReadDir(dir string) ([]os.DirEntry, error) { return os.ReadDir(dir) }
func (OS) Remove(name string) error                  { return os.Remove(name) }

func (OS) Create(name string, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	is, err := f.Stat()
	if err != nil {
		_ = f.Close()
		_ = os.Remove(name) // made here and empty: nothing is lost
		return nil, err
	}
	return &osFile{File: f, is: is}, nil
}

func (OS) SyncDir(dir string) error {
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

func (OS) Named(f File, name string) (bool, error) { return sameFile(name, f.(*osFile).is) }

// sameFileInfo is sameFile through os.Stat, where no Stat_t is at hand.
func sameFileInfo(name string, is os.FileInfo) (bool, error) {
	at, err := os.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(at, is), nil
}

//go:build !linux

package boltstore

import "os"

// fdatasync flushes f; outside Linux, with fsync (F_FULLFSYNC on macOS).
func fdatasync(f *os.File) error { return f.Sync() }

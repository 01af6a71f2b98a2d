//go:build !linux

package wal

import "os"

// Fdatasync flushes f; outside Linux, with fsync (F_FULLFSYNC on macOS).
func Fdatasync(f *os.File) error { return f.Sync() }

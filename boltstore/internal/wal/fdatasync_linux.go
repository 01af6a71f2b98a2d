package wal

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data and what is needed to read it back (its
// size), not its times: the log is appended to, never rewritten.
func Fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

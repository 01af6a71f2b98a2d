//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filecheck

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f to be read, or returns nil
// where it cannot (the walk then reads the file instead). A walk over
// the mapping touches the pages with element headers and keys and copies
// nothing; reading every page into buffers was 40-80 ms of opening a
// file of 100k records, all of it before the store could list
// (docs/decisions/2026-12-05-scale.md).
func mapFile(f *os.File, size int64) (data []byte, unmap func()) {
	if size <= 0 || int64(int(size)) != size {
		return nil, func() {}
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, func() {}
	}
	return data, func() { _ = syscall.Munmap(data) }
}

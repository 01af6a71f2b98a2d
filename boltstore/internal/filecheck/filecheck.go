// Package filecheck checks a bbolt file before bbolt trusts it, and
// turns bbolt's faults on damaged pages into errors: bbolt reads pages
// straight from a memory map and panics or faults on one that is not
// what it expects, which no caller can recover from unless the check
// or the guard comes first.
package filecheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"

	"github.com/execfsm/execfsm/storage"
)

// The parts of bbolt's file format that Validate reads (bbolt's
// internal/common: a 16-byte page header, then the meta fields, all
// little-endian on the machines bbolt supports).
const (
	pageHeaderSize   = 16
	metaMagic        = 0xED0CDAED
	metaVersion      = 2
	metaChecksumAt   = 56 // bytes of meta before its checksum
	metaSize         = metaChecksumAt + 8
	freelistPageFlag = 0x10
	noFreelist       = ^uint64(0)
)

type metaPage struct {
	pageSize       uint32
	root, freelist uint64
	pgid, txid     uint64
}

// readMeta parses the meta page at off; ok is false if it is not a valid
// one (magic, version, checksum), as bbolt would judge it.
func readMeta(f *os.File, off int64) (metaPage, bool) {
	buf := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		return metaPage{}, false
	}
	m := buf[pageHeaderSize:]
	le := binary.LittleEndian
	h := fnv.New64a()
	_, _ = h.Write(m[:metaChecksumAt])
	if le.Uint32(m[0:]) != metaMagic || le.Uint32(m[4:]) != metaVersion || le.Uint64(m[metaChecksumAt:]) != h.Sum64() {
		return metaPage{}, false
	}
	return metaPage{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}

// Validate checks an existing file before bbolt trusts it: bbolt reads
// the pages its meta page names straight from memory, and a file cut short
// (or a meta page naming pages the file does not have) makes it fault or
// panic inside Open, where nothing can recover. With walk, a file whose
// freelist is not stored has every tree checked too (see walkTrees):
// bbolt walks them inside a writable Open. A missing or empty file is left
// to Open. The error matches storage.ErrCorrupt.
func Validate(path string, walk bool) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return nil // let bbolt report what it makes of it
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	size := info.Size()
	// bbolt picks the valid meta page with the higher transaction id.
	m0, ok0 := readMeta(f, 0)
	var m1 metaPage
	var ok1 bool
	for _, ps := range []int64{int64(m0.pageSize), int64(os.Getpagesize()), 4096} {
		if ps > 0 {
			if m1, ok1 = readMeta(f, ps); ok1 {
				break
			}
		}
	}
	m, ok := m0, ok0
	if !ok0 || (ok1 && m1.txid > m0.txid) {
		m, ok = m1, ok1
	}
	if !ok {
		return bad("neither meta page is valid")
	}
	ps := int64(m.pageSize)
	switch {
	case ps < 512 || ps > 1<<20 || ps&(ps-1) != 0:
		return bad("page size %d", ps)
	case m.pgid < 2 || m.pgid > uint64(size/ps):
		return bad("the file has %d pages of %d bytes, its meta page says %d (cut short?)", size/ps, ps, m.pgid)
	case m.root >= m.pgid:
		return bad("the root page %d is past the last page %d", m.root, m.pgid)
	case m.root < 2:
		return bad("the root page %d is a meta page", m.root)
	}
	if m.freelist == noFreelist {
		if walk {
			return walkTrees(f, m)
		}
		return nil
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return bad("the freelist page %d is outside pages 2 to %d", m.freelist, m.pgid)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := f.ReadAt(hdr, int64(m.freelist)*ps); err != nil && err != io.EOF {
		return bad("reading the freelist page: %v", err)
	}
	flags, overflow := binary.LittleEndian.Uint16(hdr[8:]), binary.LittleEndian.Uint32(hdr[12:])
	if flags != freelistPageFlag {
		return bad("page %d, named as the freelist, is not one (flags %#x)", m.freelist, flags)
	}
	if m.freelist+uint64(overflow) >= m.pgid {
		return bad("the freelist runs past the last page")
	}
	return nil
}

// bad is what Validate and walkTrees return for a damaged file.
func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// ErrDamaged is damage to the database file, rather than to one record:
// it matches storage.ErrCorrupt, and its text says it is the file.
var ErrDamaged error = damagedFile{}

type damagedFile struct{}

func (damagedFile) Error() string { return "damaged database file" }

// Is makes errors.Is(err, storage.ErrCorrupt) hold.
func (damagedFile) Is(target error) bool { return target == storage.ErrCorrupt }

// Guard runs fn, turning a panic or a memory fault inside bbolt (which
// trusts the pages it reads) into an error matching storage.ErrCorrupt
// that names the file. bbolt runs a transaction's function on the
// calling goroutine, so guarding the call guards the transaction.
func Guard(path, op string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("boltstore: %s %s: %w: bbolt failed on a damaged page: %v", op, path, ErrDamaged, r)
		}
	}()
	return fn()
}

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
	"time"

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
// one (magic, version, checksum), as bbolt would judge it. err is a read
// that failed, which says nothing of the file's contents.
func readMeta(f *os.File, off int64) (m metaPage, ok bool, err error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		if err == io.EOF {
			return metaPage{}, false, nil
		}
		return metaPage{}, false, err
	}
	raw := buf[pageHeaderSize:]
	le := binary.LittleEndian
	h := fnv.New64a()
	_, _ = h.Write(raw[:metaChecksumAt])
	if le.Uint32(raw[0:]) != metaMagic || le.Uint32(raw[4:]) != metaVersion || le.Uint64(raw[metaChecksumAt:]) != h.Sum64() {
		return metaPage{}, false, nil
	}
	return metaPage{pageSize: le.Uint32(raw[8:]), root: le.Uint64(raw[16:]), freelist: le.Uint64(raw[32:]),
		pgid: le.Uint64(raw[40:]), txid: le.Uint64(raw[48:])}, true, nil
}

// Validate checks an existing file before bbolt trusts it. bbolt reads
// pages straight from memory and trusts what it finds: a file cut short,
// a meta page naming pages the file does not have, a tree page whose
// elements run out of it, a bucket whose value is shorter than a bucket,
// a stored freelist naming a page in use, each makes it fault, panic
// (in a goroutine of its own, for the tree walk of a file whose freelist
// is not stored) or, with the race detector's pointer checks, die, or
// later overwrite a live page. So every page reachable from the meta
// page bbolt will use is read and checked here first (see walkTrees),
// and the stored freelist against them (see checkFreelist): what
// etcd's bbolt, which does not store its freelist, reads at every Open.
//
// It takes the file's lock shared while it reads, waiting up to timeout
// for a writer in another process (ErrLocked then). A missing or empty
// file is left to Open, and so is a file that cannot be read (Open
// reports why). The error matches storage.ErrCorrupt.
func Validate(path string, timeout time.Duration) error { return validatePath(path, timeout, true) }

// ValidateMeta is Validate without the walk of the trees: the meta pages
// and the file's size only, what a DB that verifies its pages in the
// background (boltstore's Options.VerifyInBackground) checks before
// bbolt opens the file; ValidateOpen walks the trees after.
func ValidateMeta(path string, timeout time.Duration) error {
	return validatePath(path, timeout, false)
}

// validatePath is Validate, with the walk or without.
func validatePath(path string, timeout time.Duration, walk bool) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // missing, or unreadable: let bbolt report what it makes of it
	}
	defer f.Close()
	unlock, err := lockShared(f, timeout)
	if errors.Is(err, ErrLocked) {
		return err
	}
	if err != nil {
		return nil
	}
	defer unlock()
	return check(f, true, walk)
}

// ValidateOpen is Validate for a file that this process has open in
// bbolt, called inside a read transaction of it: bbolt does not reuse a
// page reachable from a meta page as new as the transaction's, or newer,
// until the transaction ends, so the pages read are the ones committed.
// It takes no lock (bbolt holds it).
func ValidateOpen(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: reopening it to read: %v", ErrDamaged, err)
	}
	defer f.Close()
	return validate(f)
}

// ErrLocked is what Validate returns when another process held the
// file's lock for all of its timeout.
var ErrLocked = errors.New("database file is locked by another process")

func validate(f *os.File) error { return check(f, true, true) }

// check is validate, reading the pages from a mapping of the file if
// mapping is set and the platform maps files, else with ReadAt (the
// answer is the same: FuzzValidate); without walk it checks the meta
// pages only.
func check(f *os.File, mapping, walk bool) error {
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() == 0 {
		return nil
	}
	size := info.Size()
	// bbolt picks the valid meta page with the higher transaction id.
	m0, ok0, err := readMeta(f, 0)
	if err != nil {
		return nil
	}
	var m1 metaPage
	var ok1 bool
	for _, ps := range []int64{int64(m0.pageSize), int64(os.Getpagesize()), 4096} {
		if ps > 0 {
			if m1, ok1, err = readMeta(f, ps); err != nil {
				return nil
			} else if ok1 {
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
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		return bad("the freelist page %d is outside pages 2 to %d", m.freelist, m.pgid-1)
	}
	if !walk {
		return nil
	}
	var mapped []byte
	if mapping {
		var unmap func()
		mapped, unmap = mapFile(f, size)
		defer unmap()
	}
	return walkGuarded(func() error {
		w, err := walkTrees(f, m, mapped)
		if err != nil || m.freelist == noFreelist {
			return err
		}
		return w.checkFreelist(m.freelist)
	})
}

// walkGuarded runs walk, turning a memory fault (the file cut short by
// another process while its mapping is read) into an error.
func walkGuarded(walk func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = bad("the file changed while it was read: %v", r)
		}
	}()
	return walk()
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

package filecheck

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
)

// The parts of bbolt's page format that walkTrees reads (bbolt's
// internal/common): after the 16-byte page header, count elements of 16
// bytes each, whose keys and values sit later in the page at offsets
// relative to the element itself.
const (
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	bucketLeafFlag   = 0x01 // a leaf element whose value is a bucket
	pageElementSize  = 16   // branch and leaf elements alike
	bucketHeaderSize = 16   // a bucket's value: its root page, its sequence
	// maxTreeDepth bounds the recursion: a B+tree of 4 KB pages is a
	// handful of levels deep even with billions of keys, and a damaged
	// branch must not recurse until the stack runs out.
	maxTreeDepth = 64
)

// walkTrees checks, reading the file itself, every page bbolt reaches
// from the root bucket of meta m, with the checks bbolt makes when it
// rebuilds a freelist that was not stored (NoFreelistSync): each page
// inside the file, naming itself in its header, a branch or a leaf, and
// reached once; its elements, keys and values inside it; keys increasing
// within a page and within the bounds its parent gives. bbolt makes those
// checks inside Open, walking in one goroutine while the other panics on
// what the walk reports (v1.4 panics in a goroutine of its own, v1.5 walks
// in one): a damaged page faulting or panicking the walk of v1.5, or any
// report of v1.4, kills the process, since nothing can recover another
// goroutine's panic. A file that passes here gives bbolt's walk nothing to
// report and no page to fault on. The error matches storage.ErrCorrupt.
func walkTrees(f *os.File, m metaPage) error {
	w := &treeWalker{f: f, pageSize: int64(m.pageSize), pages: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	return w.bucket(m.root)
}

type treeWalker struct {
	f        *os.File
	pageSize int64
	pages    uint64   // pages in use: every page id is below it
	seen     []uint64 // a bit per page reached
	bufs     [][]byte // a page buffer per depth, reused by siblings
}

// bucket checks the tree of the bucket whose root page is root, then the
// trees of the buckets stored in it (bbolt skips inline buckets, whose
// one page lives in their value, and so does this).
func (w *treeWalker) bucket(root uint64) error {
	var children []uint64
	if _, err := w.tree(root, nil, nil, 0, &children); err != nil {
		return err
	}
	for _, child := range children {
		if err := w.bucket(child); err != nil {
			return err
		}
	}
	return nil
}

// read returns page id and its overflow pages, marking them reached.
func (w *treeWalker) read(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, bad("page %d is outside pages 2 to %d", id, w.pages-1)
	}
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	buf, err := w.load(id, 1, depth)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	self, flags, overflow := le.Uint64(buf[0:]), le.Uint16(buf[8:]), uint64(le.Uint32(buf[12:]))
	switch {
	case self != id:
		return nil, bad("page %d says it is page %d", id, self)
	case flags != branchPageFlag && flags != leafPageFlag:
		return nil, bad("page %d is neither a branch nor a leaf (flags %#x)", id, flags)
	case id+overflow >= w.pages:
		return nil, bad("page %d runs past the last page", id)
	}
	for p := id; p <= id+overflow; p++ {
		if w.seen[p/64]&(1<<(p%64)) != 0 {
			return nil, bad("page %d is reached twice", p)
		}
		w.seen[p/64] |= 1 << (p % 64)
	}
	if overflow == 0 {
		return buf, nil
	}
	return w.load(id, overflow+1, depth) // the page read again, with the pages after it
}

// load reads pages pages from page id on into the buffer of depth.
func (w *treeWalker) load(id, pages uint64, depth int) ([]byte, error) {
	size := int64(pages) * w.pageSize
	if int64(cap(w.bufs[depth])) < size {
		w.bufs[depth] = make([]byte, size)
	}
	buf := w.bufs[depth][:size]
	if _, err := w.f.ReadAt(buf, int64(id)*w.pageSize); err != nil && err != io.EOF {
		return nil, bad("reading page %d: %v", id, err)
	}
	return buf, nil
}

// tree checks the subtree at page id, whose keys must be at least low
// (unless nil) and below high (unless nil), as bbolt's key-order check
// has it, and returns a copy of its largest key. Buckets stored in its
// leaves are appended to children.
func (w *treeWalker) tree(id uint64, low, high []byte, depth int, children *[]uint64) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, bad("page %d is deeper than %d levels", id, maxTreeDepth)
	}
	page, err := w.read(id, depth)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	branch := le.Uint16(page[8:]) == branchPageFlag
	count := int(le.Uint16(page[10:]))
	if pageHeaderSize+count*pageElementSize > len(page) {
		return nil, bad("page %d: %d elements do not fit in it", id, count)
	}
	// field returns n bytes at off bytes past element i, inside the page.
	field := func(i int, off, n uint64) ([]byte, error) {
		start := uint64(pageHeaderSize+i*pageElementSize) + off
		if start+n > uint64(len(page)) {
			return nil, bad("page %d, element %d: runs past the page", id, i)
		}
		return page[start : start+n], nil
	}
	key := func(i int) ([]byte, error) {
		e := page[pageHeaderSize+i*pageElementSize:]
		if branch {
			return field(i, uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:])))
		}
		return field(i, uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])))
	}
	var largest []byte
	running := low
	for i := range count {
		k, err := key(i)
		if err != nil {
			return nil, err
		}
		if c := bytes.Compare(running, k); (i == 0 && running != nil && c > 0) || (i > 0 && c >= 0) {
			return nil, bad("page %d: key %d is out of order", id, i)
		}
		if high != nil && bytes.Compare(k, high) >= 0 {
			return nil, bad("page %d: key %d is past its parent's next key", id, i)
		}
		e := page[pageHeaderSize+i*pageElementSize:]
		if !branch {
			running = k
			// The value too, though bbolt's walk reads only buckets':
			// every later read then stays inside the page.
			pos, ksize, vsize := uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
			v, err := field(i, pos+ksize, vsize)
			if err != nil {
				return nil, err
			}
			if le.Uint32(e[0:])&bucketLeafFlag != 0 {
				if len(v) < bucketHeaderSize {
					return nil, bad("page %d, element %d: a bucket of %d bytes", id, i, len(v))
				}
				root := le.Uint64(v)
				// An inline bucket (root 0) holds its one page in its
				// value, after the header.
				if root == 0 && len(v) < bucketHeaderSize+pageHeaderSize {
					return nil, bad("page %d, element %d: a bucket of %d bytes", id, i, len(v))
				}
				if root != 0 {
					*children = append(*children, root)
				}
			}
			continue
		}
		next := high
		if i < count-1 {
			if next, err = key(i + 1); err != nil {
				return nil, err
			}
		}
		// The child's page is read into the next depth's buffer: this
		// page's keys, which low and high point into, stay as they are.
		if largest, err = w.tree(le.Uint64(e[8:]), k, next, depth+1, children); err != nil {
			return nil, err
		}
		running = largest
	}
	if !branch {
		if count == 0 {
			return nil, nil
		}
		return bytes.Clone(running), nil
	}
	return largest, nil
}

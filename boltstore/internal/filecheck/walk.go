package filecheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
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
// walks its trees (to rebuild a freelist that was not stored, or in
// Tx.Check) and those it never makes but trusts: each page inside the
// file, naming itself in its header, a branch or a leaf, and reached
// once; its elements, keys and values inside it; keys increasing within
// a page and within the bounds its parent gives; a bucket's value long
// enough to be a bucket, and an inline bucket's page (which lives in
// that value) a leaf whose elements stay inside the value. A file that
// passes gives bbolt's reads no page to fault on and no element that
// points outside its page. The walker it returns knows which pages are
// in use, for checkFreelist. The error matches storage.ErrCorrupt.
func walkTrees(f *os.File, m metaPage, mapped []byte) (*treeWalker, error) {
	w := &treeWalker{f: f, mapped: mapped, pageSize: int64(m.pageSize), pages: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	return w, w.bucket(m.root)
}

type treeWalker struct {
	f *os.File
	// mapped is the file mapped to be read (see mapFile), nil where it
	// is read with ReadAt; a page past its end is read so too.
	mapped   []byte
	pageSize int64
	pages    uint64   // pages in use: every page id is below it
	seen     []uint64 // a bit per page reached
	bufs     [][]byte // a page buffer per depth, reused by siblings
	// ahead holds, per depth, the pages of that depth read ahead by their
	// parent branch (see readAhead).
	ahead []readAhead
}

// readAhead is the children of one branch page, read in runs: one
// system call a run of nearby pages (with the overflow pages between
// them, which the children need too) instead of one or two a page. A
// file of 100k records has 50k leaves of two pages each; read one by
// one they took 250 ms of every Open (docs/decisions/2026-12-05-scale.md).
type readAhead struct {
	buf []byte
	// from maps a child's page id to the bytes read from that page to
	// the end of its run.
	from map[uint64][]byte
}

// Runs read ahead: at most maxRun pages; a gap of at most maxGap pages
// between two children is read rather than split, and maxTail pages
// after the last child of a run (a leaf of records of a few KB has an
// overflow page or two after it).
const (
	maxRun  = 256
	maxGap  = 8
	maxTail = 2
)

// readAhead reads the pages ids (the children of a branch at depth-1)
// into the buffer of depth. An id outside the file is left to load, to
// report; so is every id of a run whose read fails or comes up short.
func (w *treeWalker) readAhead(ids []uint64, depth int) {
	if w.mapped != nil {
		return // nothing to read ahead: the pages are there
	}
	for len(w.ahead) <= depth {
		w.ahead = append(w.ahead, readAhead{from: map[uint64][]byte{}})
	}
	ra := &w.ahead[depth]
	clear(ra.from)
	sorted := make([]uint64, 0, len(ids))
	for _, id := range ids {
		if id >= 2 && id < w.pages {
			sorted = append(sorted, id)
		}
	}
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	// A run ends maxTail pages after its last child, for that child's
	// overflow pages if it has any.
	type run struct{ first, last, end uint64 }
	var runs []run
	for k, id := range sorted {
		if k > 0 {
			if r := &runs[len(runs)-1]; id-r.last <= maxGap && id-r.first < maxRun {
				r.last = id
				continue
			}
		}
		runs = append(runs, run{first: id, last: id})
	}
	var total int64
	for k := range runs {
		runs[k].end = min(w.pages, runs[k].last+1+maxTail)
		total += int64(runs[k].end-runs[k].first) * w.pageSize
	}
	if int64(cap(ra.buf)) < total {
		ra.buf = make([]byte, total)
	}
	buf := ra.buf[:0]
	next := 0 // the first id of sorted not yet in a run read
	for _, r := range runs {
		n := int64(r.end-r.first) * w.pageSize
		read := buf[len(buf) : int64(len(buf))+n]
		buf = buf[:int64(len(buf))+n]
		_, err := w.f.ReadAt(read, int64(r.first)*w.pageSize)
		for ; next < len(sorted) && sorted[next] <= r.last; next++ {
			if err == nil {
				ra.from[sorted[next]] = read[int64(sorted[next]-r.first)*w.pageSize:]
			}
		}
	}
}

// bucket checks the tree of the bucket whose root page is root, then the
// trees of the buckets stored in it.
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

// reached marks page p reached, and says whether it was already.
func (w *treeWalker) reached(p uint64) bool {
	was := w.seen[p/64]&(1<<(p%64)) != 0
	w.seen[p/64] |= 1 << (p % 64)
	return was
}

// read returns page id and its overflow pages, marking them reached.
func (w *treeWalker) read(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, bad("page %d is outside pages 2 to %d", id, w.pages-1)
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
		if w.reached(p) {
			return nil, bad("page %d is reached twice", p)
		}
	}
	if overflow == 0 {
		return buf, nil
	}
	return w.load(id, overflow+1, depth) // the page read again, with the pages after it
}

// load reads pages pages from page id on into the buffer of depth.
func (w *treeWalker) load(id, pages uint64, depth int) ([]byte, error) {
	size := int64(pages) * w.pageSize
	if off := int64(id) * w.pageSize; off+size <= int64(len(w.mapped)) {
		return w.mapped[off : off+size : off+size], nil
	}
	if depth < len(w.ahead) {
		if from, ok := w.ahead[depth].from[id]; ok && int64(len(from)) >= size {
			return from[:size:size], nil
		}
	}
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	if int64(cap(w.bufs[depth])) < size {
		w.bufs[depth] = make([]byte, size)
	}
	buf := w.bufs[depth][:size]
	if _, err := w.f.ReadAt(buf, int64(id)*w.pageSize); err != nil && err != io.EOF {
		return nil, bad("reading page %d: %v", id, err)
	}
	return buf, nil
}

// where names a page in an error: a page of the file, or the page of an
// inline bucket, which lives in a value in a page of the file.
type where struct {
	page   uint64
	inline bool
}

func (at where) String() string {
	if at.inline {
		return fmt.Sprintf("an inline bucket in page %d", at.page)
	}
	return fmt.Sprintf("page %d", at.page)
}

// tree checks the subtree at page id, whose keys must be at least low
// (unless nil) and below high (unless nil), as bbolt's key-order check
// has it, and returns a copy of its largest key. Buckets stored in its
// leaves are appended to children, or checked at once if inline.
func (w *treeWalker) tree(id uint64, low, high []byte, depth int, children *[]uint64) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, bad("page %d is deeper than %d levels", id, maxTreeDepth)
	}
	page, err := w.read(id, depth)
	if err != nil {
		return nil, err
	}
	return w.elements(page, where{page: id}, low, high, depth, children)
}

// elements checks the elements of page, as tree has it; an inline
// bucket's page is the rest of the bucket's value, and its elements
// stay inside that.
func (w *treeWalker) elements(page []byte, at where, low, high []byte, depth int, children *[]uint64) ([]byte, error) {
	le := binary.LittleEndian
	branch := le.Uint16(page[8:]) == branchPageFlag
	count := int(le.Uint16(page[10:]))
	if pageHeaderSize+count*pageElementSize > len(page) {
		return nil, bad("%s: %d elements do not fit in it", at, count)
	}
	// field returns n bytes at off bytes past element i, inside the page.
	field := func(i int, off, n uint64) ([]byte, error) {
		start := uint64(pageHeaderSize+i*pageElementSize) + off
		if start+n > uint64(len(page)) || start+n < start {
			return nil, bad("%s, element %d: runs past the page", at, i)
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
	if branch {
		children := make([]uint64, count)
		for i := range count {
			children[i] = le.Uint64(page[pageHeaderSize+i*pageElementSize+8:])
		}
		w.readAhead(children, depth+1)
	}
	var largest []byte
	running := low
	for i := range count {
		k, err := key(i)
		if err != nil {
			return nil, err
		}
		if c := bytes.Compare(running, k); (i == 0 && running != nil && c > 0) || (i > 0 && c >= 0) {
			return nil, bad("%s: key %d is out of order", at, i)
		}
		if high != nil && bytes.Compare(k, high) >= 0 {
			return nil, bad("%s: key %d is past its parent's next key", at, i)
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
				if err := w.bucketValue(v, at, i, depth, children); err != nil {
					return nil, err
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

// bucketValue checks the value of element i of a leaf, marked as a
// bucket: a bucket header (its root page, its sequence), and for an
// inline bucket (root 0) a leaf page after it, checked now, while the
// page that holds it is still in its buffer. bbolt reads a bucket's
// header and an inline page wherever the value starts, trusting its
// length; with the race detector's pointer checks, a value too short
// for them kills the process.
func (w *treeWalker) bucketValue(v []byte, at where, i, depth int, children *[]uint64) error {
	if len(v) < bucketHeaderSize {
		return bad("%s, element %d: a bucket of %d bytes", at, i, len(v))
	}
	root := binary.LittleEndian.Uint64(v)
	if root != 0 {
		*children = append(*children, root)
		return nil
	}
	page := v[bucketHeaderSize:]
	inline := where{page: at.page, inline: true}
	switch {
	case len(page) < pageHeaderSize:
		return bad("%s, element %d: a bucket of %d bytes", at, i, len(v))
	case binary.LittleEndian.Uint16(page[8:]) != leafPageFlag:
		return bad("%s is not a leaf (flags %#x)", inline, binary.LittleEndian.Uint16(page[8:]))
	case depth >= maxTreeDepth:
		return bad("%s is deeper than %d levels", inline, maxTreeDepth)
	}
	_, err := w.elements(page, inline, nil, nil, depth+1, children)
	return err
}

// checkFreelist checks the freelist stored at page id against the trees
// walked: bbolt hands out the pages it names for new writes, so a page
// it names that is in use would be overwritten, and one past the last
// page, or named twice, breaks bbolt's own accounting. Its count is the
// page's, or, at 0xFFFF, the first id's (bbolt's overflow convention).
func (w *treeWalker) checkFreelist(id uint64) error {
	hdr, err := w.load(id, 1, 0)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	flags, count, overflow := le.Uint16(hdr[8:]), uint64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
	switch {
	case flags != freelistPageFlag:
		return bad("page %d, named as the freelist, is not one (flags %#x)", id, flags)
	case id+overflow >= w.pages:
		return bad("the freelist runs past the last page")
	}
	page, err := w.load(id, overflow+1, 0)
	if err != nil {
		return err
	}
	ids := page[pageHeaderSize:]
	if count == 0xFFFF {
		count = le.Uint64(ids)
		ids = ids[8:]
	}
	if count > uint64(len(ids)/8) {
		return bad("the freelist names %d pages, its %d pages hold %d", count, overflow+1, len(ids)/8)
	}
	for p := id; p <= id+overflow; p++ {
		if w.reached(p) {
			return bad("the freelist's page %d is in use by a tree", p)
		}
	}
	for i := range count {
		free := le.Uint64(ids[i*8:])
		switch {
		case free < 2 || free >= w.pages:
			return bad("the freelist names page %d, outside pages 2 to %d", free, w.pages-1)
		case w.reached(free):
			return bad("the freelist names page %d, which is in use or named twice", free)
		}
	}
	return nil
}

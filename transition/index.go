package transition

import (
	"reflect"
	"unsafe"
)

// maxDense bounds the integer values a dense index covers: the slot slice
// is at most this long, so a table of small integer states costs a few KiB.
const maxDense = 4096

// denseIndex maps states whose type is an integer kind (state.Status, any
// iota enum) to their table index with one slice load instead of a map
// lookup. A generic map lookup costs more than the whole rest of a
// transition, and Allowed is meant to cost about what a bare array lookup
// does.
type denseIndex struct {
	ok    bool
	size  uintptr  // byte size of the integer type: 1, 2, 4 or 8
	slots []uint16 // value → index+1; 0 means "not a state"
	// edges repeats the table's edge flags indexed by value instead of by
	// index (width×width, width = largest value + 1), so Allowed is two
	// loads of the arguments and one of the matrix. Kept only when the
	// largest value is below maxDenseEdges.
	edges []uint8
	width uint64
}

// maxDenseEdges bounds the value-indexed edge matrix to 64 KiB.
const maxDenseEdges = 256

// newDenseIndex returns a usable index only when every state is an
// integer in [0, maxDense); otherwise ok is false and lookups use the map.
func newDenseIndex[S comparable](states []S) denseIndex {
	typ := reflect.TypeFor[S]()
	switch typ.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		return denseIndex{}
	}
	d := denseIndex{ok: true, size: typ.Size()}
	maxValue := uint64(0)
	for _, s := range states {
		v := readUint(unsafe.Pointer(&s), d.size)
		if v >= maxDense {
			return denseIndex{}
		}
		maxValue = max(maxValue, v)
	}
	d.slots = make([]uint16, maxValue+1)
	for i, s := range states {
		d.slots[readUint(unsafe.Pointer(&s), d.size)] = uint16(i + 1)
	}
	return d
}

// addEdges fills the value-indexed edge matrix from the table's.
func (d *denseIndex) addEdges(edges []uint8, n int) {
	width := uint64(len(d.slots))
	if !d.ok || width > maxDenseEdges {
		return
	}
	d.width = width
	d.edges = make([]uint8, width*width)
	for a, ia := range d.slots {
		for b, ib := range d.slots {
			if ia != 0 && ib != 0 {
				d.edges[uint64(a)*width+uint64(b)] = edges[int(ia-1)*n+int(ib-1)]
			}
		}
	}

}

// readUint reads the integer at p as the unsigned integer of its size.
// The kind check in newDenseIndex makes the reinterpretation sound; a
// negative value of a signed type reads as a huge one and so misses, which
// is right because a dense table holds no negative states.
func readUint(p unsafe.Pointer, size uintptr) uint64 {
	switch size {
	case 1:
		return uint64(*(*uint8)(p))
	case 2:
		return uint64(*(*uint16)(p))
	case 4:
		return uint64(*(*uint32)(p))
	default:
		return *(*uint64)(p)
	}
}

// denseLookup returns the table index of s, which must be of the integer
// type the index was built for.
func denseLookup[S comparable](d *denseIndex, s S) (int, bool) {
	v := readUint(unsafe.Pointer(&s), d.size)
	if v >= uint64(len(d.slots)) {
		return 0, false
	}
	i := d.slots[v]
	return int(i) - 1, i != 0
}

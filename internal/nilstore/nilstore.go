// Package nilstore tells a store that cannot work from one that can, for
// the constructors that take one: a nil interface, or one holding a nil
// pointer (a *boltstore.Store never opened), would fail on the first call
// instead of at construction.
package nilstore

import (
	"reflect"

	"github.com/execfsm/execfsm/storage"
)

// Is reports whether store is nil, or an interface holding a nil
// pointer, map, slice, function or channel.
func Is(store storage.Store) bool {
	if store == nil {
		return true
	}
	v := reflect.ValueOf(store)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

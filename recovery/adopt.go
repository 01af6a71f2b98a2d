package recovery

import "context"

// Identity is who an item is, as the external world records it: the
// labels and annotations of a Kubernetes Job, the label file of a child
// process. A controller rebuilding its view after a crash takes identity
// from here, never from a private checkpoint that may have drifted.
// VILLAScontroller's Kubernetes Jobs carry exactly these fields.
type Identity struct {
	UUID     string            // the item's own id, kept across restarts
	Manager  string            // the id of the controller (manager) that owns it
	Name     string            // a human-readable name
	Location string            // where it runs
	Realm    string            // the tenant or realm it belongs to
	Owner    string            // the user who owns it
	Extra    map[string]string // anything else the world keeps
}

// Item is one thing a [Loop] reconciles, as listed from the world.
type Item[K comparable] struct {
	Key      K
	Identity Identity
}

// Adopter rebuilds the controller's in-memory item for something the world
// has, under the identity the world gives it, during the recovery pass
// that precedes normal reconciliation. It runs for every listed item: a
// controller that just started knows nothing, whether it created the item
// in an earlier life or never heard of it.
//
// An Adopter may also implement [GoneHandler].
type Adopter[K comparable] interface {
	Adopt(ctx context.Context, item Item[K]) error
}

// AdopterFunc adapts a function to [Adopter].
type AdopterFunc[K comparable] func(ctx context.Context, item Item[K]) error

// Adopt calls f.
func (f AdopterFunc[K]) Adopt(ctx context.Context, item Item[K]) error { return f(ctx, item) }

// GoneHandler is told, during the recovery pass, about a key the
// controller expected (see Options.Known) that the world no longer has:
// a pod that died, a process killed while the controller was down. The
// key is reconciled afterwards as well, so the reconciler, reading the
// world, marks it gone for good.
type GoneHandler[K comparable] interface {
	Gone(ctx context.Context, key K) error
}

// Package testwait bounds the waits of the core module's tests: a
// regression is a failure that says what it waited for, not a test binary
// hung until go test kills it.
package testwait

import (
	"testing"
	"time"
)

// Bound is how long a test waits for anything.
const Bound = 20 * time.Second

// Recv receives one value from ch, or fails t naming what it waited for
// (also when ch is closed).
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel was closed", what)
		}
		return v
	case <-time.After(Bound):
		t.Fatalf("%s: nothing came within %v", what, Bound)
	}
	var zero T
	return zero
}

// Closed waits for ch to be closed, or fails t naming what it waited for.
func Closed[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	deadline := time.After(Bound)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("%s: not within %v", what, Bound)
		}
	}
}

package reconciletest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/reconcile"
)

// stopBound is how long Start's stop function waits for Run to return,
// and Idle for the loop to settle, before failing the test.
const stopBound = 20 * time.Second

// Start runs l in the background for the rest of the test and returns a
// function that stops it (cancels Run's context and waits for Run to
// return). The test fails if Run returns an error or does not return
// within 20 seconds of being stopped. Stopping twice is harmless; the
// test's cleanup stops it in any case.
func Start[K comparable](t testing.TB, l *reconcile.Loop[K]) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			bound := time.NewTimer(stopBound)
			defer bound.Stop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("reconciletest: Run returned %v", err)
				}
			case <-bound.C:
				t.Errorf("reconciletest: Run did not return within %v of being stopped", stopBound)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Idle waits until l has nothing queued, running or waiting for a retry
// (see [reconcile.Loop.Idle]), and fails the test if that takes longer
// than 20 seconds.
func Idle[K comparable](t testing.TB, l *reconcile.Loop[K]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	if err := l.Idle(ctx); err != nil {
		t.Fatalf("reconciletest: the loop did not become idle: %v", err)
	}
}

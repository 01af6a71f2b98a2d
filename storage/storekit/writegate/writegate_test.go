package writegate

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Lost closes only after the write in flight has returned, and no write
// runs after it.
func TestTheOwnershipEndsOnlyAfterTheWritesInFlight(t *testing.T) {
	g := New()
	inWrite, release := make(chan struct{}), make(chan struct{})
	var landed atomic.Bool
	wrote := make(chan bool)
	go func() {
		wrote <- g.Write(func() {
			close(inWrite)
			<-release
			landed.Store(true)
		})
	}()
	<-inWrite
	ended := make(chan struct{})
	go func() { g.End(); close(ended) }()
	select {
	case <-g.Lost():
		t.Fatal("Lost closed while a write was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-g.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost did not close once the write returned")
	}
	require.True(t, landed.Load(), "the write in flight landed before Lost closed")
	require.True(t, <-wrote)
	<-ended

	require.False(t, g.Write(func() { t.Fatal("a write ran after the ownership ended") }))
	g.End() // idempotent
}

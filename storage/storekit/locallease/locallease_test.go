package locallease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An acquirer that finds another's take-over still being written waits
// for its outcome: when that take-over fails, nobody held the record, so
// the acquirer takes it instead of being told it is held.
func TestAnAcquireDuringATakeOverThatFailsTakesTheRecord(t *testing.T) {
	var table Table
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	writing, fail := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := table.Acquire(ctx, "ex-1", false, nil, func() (string, uint64, error) {
			close(writing)
			<-fail
			return "", 0, errors.New("the record moved on")
		})
		first <- err
	}()
	<-writing
	second := make(chan error, 1)
	var got *Held
	go func() {
		h, err := table.Acquire(ctx, "ex-1", false, nil, func() (string, uint64, error) { return "pod-b", 2, nil })
		got = h
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second acquirer did not wait for the first's outcome: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(fail)
	require.Error(t, <-first)
	select {
	case err := <-second:
		require.NoError(t, err, "the failed take-over held nothing")
		require.Equal(t, "pod-b", got.Owner)
	case <-time.After(20 * time.Second):
		t.Fatal("the second acquirer never learned the first failed")
	}

	// A take-over that succeeds is held once it is written.
	owner, epoch, ok := table.Holder("ex-1")
	require.True(t, ok)
	require.Equal(t, "pod-b", owner)
	require.Equal(t, uint64(2), epoch)
	_, err := table.Acquire(ctx, "ex-1", false, nil, func() (string, uint64, error) { return "pod-c", 3, nil })
	var busy *BusyError
	require.ErrorAs(t, err, &busy)
	require.Equal(t, "pod-b", busy.Holder)
}

// Write runs while the ownership lasts and holds its end off; after the
// end it runs nothing.
func TestWritesLandBeforeTheEndOrNotAtAll(t *testing.T) {
	var table Table
	h, err := table.Acquire(context.Background(), "ex-1", false, nil, func() (string, uint64, error) { return "pod-a", 1, nil })
	require.NoError(t, err)
	inWrite, finish := make(chan struct{}), make(chan struct{})
	wrote := make(chan bool, 1)
	go func() { wrote <- h.Write(func() { close(inWrite); <-finish }) }()
	<-inWrite
	released := make(chan struct{})
	go func() { h.Release(); close(released) }()
	select {
	case <-released:
		t.Fatal("the ownership ended while a write under it ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	require.True(t, <-wrote)
	select {
	case <-released:
	case <-time.After(20 * time.Second):
		t.Fatal("Release did not return once the write had")
	}
	<-h.Lost()
	require.False(t, h.Write(func() { t.Error("a write ran after the end") }))
}

// Holds taken under another end with it; one released alone leaves the
// others; a parent that has ended holds nothing more.
func TestHoldsUnderAParentEndWithIt(t *testing.T) {
	var table Table
	take := func(id string, parent *Held) (*Held, error) {
		return table.Acquire(context.Background(), id, false, parent, func() (string, uint64, error) { return "mgr", 1, nil })
	}
	parent, err := take("leader", nil)
	require.NoError(t, err)
	one, err := take("job-1", parent)
	require.NoError(t, err)
	two, err := take("job-2", parent)
	require.NoError(t, err)
	require.True(t, one.Under())
	require.False(t, parent.Under())
	require.True(t, table.Owns(one))
	require.False(t, (&Table{}).Owns(one))

	one.Release()
	require.False(t, one.Live())
	require.True(t, two.Live(), "a sibling's release leaves it")
	require.True(t, parent.Live())

	parent.Release()
	select {
	case <-two.Lost():
	default:
		t.Fatal("a hold under the parent outlived it")
	}
	_, _, ok := table.Holder("job-2")
	require.False(t, ok)
	_, err = take("job-3", parent)
	require.ErrorIs(t, err, ErrParentEnded)
	_, _, ok = table.Holder("job-3")
	require.False(t, ok, "nothing held")
}

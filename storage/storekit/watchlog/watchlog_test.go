package watchlog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// alwaysCompacted is a source whose log always says it was compacted,
// even past the snapshot it just gave: tampered metadata.
type alwaysCompacted struct{ snapshots int }

func (*alwaysCompacted) Since(uint64, int) ([]Entry, bool, error) { return nil, true, nil }

func (s *alwaysCompacted) Snapshot() ([]Entry, uint64, error) {
	s.snapshots++
	return []Entry{{ID: "ex-1", Revision: 3}}, 3, nil
}

func TestFollowRefusesASourceThatContradictsItsOwnSnapshot(t *testing.T) {
	var h Hub
	src := &alwaysCompacted{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	emitted := 0
	err := h.Follow(ctx, src, 0, func(Entry) bool { emitted++; return true })
	require.ErrorIs(t, err, ErrInconsistent)
	require.Equal(t, 1, src.snapshots, "no busy loop of snapshots")
	require.Zero(t, emitted)
}

func TestDoneIsClosedByCloseWhenAskedBeforeOrAfter(t *testing.T) {
	var before, after Hub
	early := before.Done()
	before.Close()
	after.Close()
	for name, ch := range map[string]<-chan struct{}{"before": early, "after": after.Done()} {
		select {
		case <-ch:
		default:
			t.Fatalf("Done %s Close is not closed", name)
		}
	}
}

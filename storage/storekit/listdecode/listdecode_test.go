package listdecode_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storekit/listdecode"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBad = errors.New("bad value")

// decodeNumber is a decoder for the tests: a value is its record's
// revision in decimal, "bad" does not decode.
func decodeNumber(id, value []byte) (storage.Record, error) {
	n, err := strconv.ParseUint(string(value), 10, 64)
	if err != nil {
		return storage.Record{}, fmt.Errorf("%s: %w", id, errBad)
	}
	return storage.Record{ID: string(id), Revision: n}, nil
}

func unreadable(id []byte, err error) storage.Unreadable {
	return storage.Unreadable{ID: string(id), Err: err}
}

// Whatever the number of values and wherever the bad ones are, a
// Pipeline returns what decoding them one by one in order does.
func TestPipelineDecodesAsOneByOneInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 2000).Draw(t, "values")
		p := listdecode.NewPipeline(decodeNumber, unreadable)
		var want []storage.Record
		var wantBad []storage.Unreadable
		for i := range n {
			id := fmt.Sprintf("ex-%05d", i)
			value := strconv.Itoa(i)
			if rapid.IntRange(0, 20).Draw(t, "bad") == 0 {
				value = "bad"
			}
			rec, err := decodeNumber([]byte(id), []byte(value))
			if err != nil {
				wantBad = append(wantBad, unreadable([]byte(id), err))
			} else {
				want = append(want, rec)
			}
			p.Add([]byte(id), []byte(value))
		}
		got, bad := p.Wait()
		require.Equal(t, want, got)
		require.Equal(t, wantBad, bad)
		for _, u := range bad {
			require.ErrorIs(t, u.Err, errBad)
		}
	})
}

// The values may be memory that is gone once Wait returns (a bbolt
// transaction's pages): nothing decodes after it, and everything before.
func TestPipelineDecodesNothingAfterWait(t *testing.T) {
	var waited atomic.Bool
	var late, decoded atomic.Int64
	p := listdecode.NewPipeline(func(id, value []byte) (storage.Record, error) {
		if waited.Load() {
			late.Add(1)
		}
		decoded.Add(1)
		return decodeNumber(id, value)
	}, unreadable)
	const n = 10_000
	for i := range n {
		p.Add([]byte(strconv.Itoa(i)), []byte(strconv.Itoa(i)))
	}
	got, bad := p.Wait()
	waited.Store(true)
	require.Len(t, got, n)
	require.Empty(t, bad)
	require.Equal(t, int64(n), decoded.Load())
	require.Zero(t, late.Load())
}

// A listing of nothing is nothing, and asks for no goroutine.
func TestPipelineOfNothing(t *testing.T) {
	got, bad := listdecode.NewPipeline(decodeNumber, unreadable).Wait()
	require.Nil(t, got)
	require.Nil(t, bad)
}

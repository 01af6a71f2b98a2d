package state_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/state"
	"github.com/stretchr/testify/require"
)

// The wire form must stay identical to Teraslice's _status values.
var terasliceNames = map[state.Status]string{
	state.Pending: "pending", state.Scheduling: "scheduling", state.Initializing: "initializing",
	state.Running: "running", state.Recovering: "recovering", state.Relocating: "relocating",
	state.Failing: "failing", state.Paused: "paused", state.Stopping: "stopping",
	state.Completed: "completed", state.Stopped: "stopped", state.Rejected: "rejected",
	state.Failed: "failed", state.Terminated: "terminated",
}

func TestEveryStatusHasItsTerasliceNameAndParsesBack(t *testing.T) {
	require.Len(t, terasliceNames, state.NumStatuses)
	for s, name := range terasliceNames {
		require.True(t, s.Valid())
		require.Equal(t, name, s.String())
		text, err := s.MarshalText()
		require.NoError(t, err)
		require.Equal(t, name, string(text))
		back, err := state.Parse(name)
		require.NoError(t, err)
		require.Equal(t, s, back)
	}
}

func TestZeroStatusIsInvalid(t *testing.T) {
	var s state.Status
	require.False(t, s.Valid())
	require.Equal(t, "Status(0)", s.String())
	require.Equal(t, "Status(15)", state.Status(15).String())
	_, err := s.MarshalText()
	require.Error(t, err)
	require.False(t, s.IsInit() || s.IsRunning() || s.IsTerminal() || s.IsFailed())
}

func TestParseRejectsAnythingButAnExactName(t *testing.T) {
	for _, in := range []string{
		"", "Running", "RUNNING", " running", "running ", "running\n", "runnin", "runningg",
		"relocate", "0", "4", "\x00", "\xff\xfe", "pending,running", strings.Repeat("x", 1<<20),
	} {
		s, err := state.Parse(in)
		require.Error(t, err, "%q", in)
		require.True(t, errors.Is(err, state.ErrUnknownStatus), "%q: %v", in, err)
		require.Zero(t, s)
		require.Contains(t, err.Error(), "relocating", "the error lists the valid names")
		require.Less(t, len(err.Error()), 400, "a huge input is not repeated whole")
	}
}

func TestJSONUsesTheTextForm(t *testing.T) {
	type doc struct {
		Status state.Status `json:"_status"`
	}
	out, err := json.Marshal(doc{state.Relocating})
	require.NoError(t, err)
	require.JSONEq(t, `{"_status":"relocating"}`, string(out))

	var in doc
	require.NoError(t, json.Unmarshal([]byte(`{"_status":"paused"}`), &in))
	require.Equal(t, state.Paused, in.Status)

	in.Status = state.Running
	err = json.Unmarshal([]byte(`{"_status":"Paused"}`), &in)
	require.ErrorIs(t, err, state.ErrUnknownStatus)
	require.Equal(t, state.Running, in.Status, "a failed decode leaves the value alone")

	_, err = json.Marshal(doc{})
	require.Error(t, err, "an invalid status is not written")
}

func FuzzParse(f *testing.F) {
	for _, name := range terasliceNames {
		f.Add(name)
	}
	f.Add("")
	f.Add("Running")
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := state.Parse(in)
		if err != nil {
			require.ErrorIs(t, err, state.ErrUnknownStatus)
			require.Zero(t, s)
			return
		}
		require.True(t, s.Valid())
		require.Equal(t, in, s.String())
	})
}

func FuzzUnmarshalText(f *testing.F) {
	f.Add([]byte("relocating"))
	f.Add([]byte("terminated"))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := state.Paused
		err := s.UnmarshalText(in)
		if err != nil {
			require.ErrorIs(t, err, state.ErrUnknownStatus)
			require.Equal(t, state.Paused, s)
			return
		}
		out, err := s.MarshalText()
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
}

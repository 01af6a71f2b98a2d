package proc

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain runs this test binary as the children the tests start.
func TestMain(m *testing.M) {
	spec, isChild, err := ChildSpec()
	if !isChild {
		goleak.VerifyTestMain(m)
		return
	}
	if err != nil {
		os.Exit(2)
	}
	switch spec.Role {
	case "emitter":
		fmt.Println("prose for people, which nobody waits on")
		Emit("step", "n", "1")
		// A grandchild that outlives this process, as a simulator
		// outlives its manager.
		pid, err := StartDetached("sleeper", nil, os.DevNull)
		if err != nil {
			os.Exit(3)
		}
		Emit("step", "n", "2", "sleeper", strconv.Itoa(pid))
		os.Exit(0)
	case "sleeper":
		Emit("never") // a detached child reports nothing: nobody reads it
		time.Sleep(time.Minute)
	}
	os.Exit(4)
}

// A child's events arrive in order, with their attributes, and end with
// the child, even while a process it started outlives it.
func TestEventsArriveAndEndWithTheChild(t *testing.T) {
	var g Group
	defer g.KillAll()
	ctx := context.Background()
	c, err := g.Start("emitter", "emitter", nil)
	require.NoError(t, err)
	second, err := c.Await(ctx, "step", map[string]string{"n": "2"}, 30*time.Second)
	require.NoError(t, err)
	sleeper, err := strconv.Atoi(second.Attrs["sleeper"])
	require.NoError(t, err)
	defer func() { _ = syscall.Kill(sleeper, syscall.SIGKILL) }()

	exit, err := c.Wait(ctx, 10*time.Second)
	require.NoError(t, err, "the grandchild must not hold the events pipe open")
	require.Equal(t, 0, exit.Code)
	require.Equal(t, []Event{{Kind: "step", Attrs: map[string]string{"n": "1"}}, second}, c.Events())

	_, err = c.Await(ctx, "never", nil, 10*time.Second)
	require.ErrorIs(t, err, ErrExited, "the grandchild's events go nowhere")
	require.ErrorContains(t, err, "reported: ", "the error shows what the child did report")
	require.ErrorContains(t, err, "prose for people, which nobody waits on", "and the last lines it printed, with no Echo set")
}

func TestHasMatchesKindAndEveryWantedAttribute(t *testing.T) {
	ev := Event{Kind: "verdict", Attrs: map[string]string{"decision": "resume", "to": "running"}}
	require.True(t, ev.Has("verdict", nil))
	require.True(t, ev.Has("verdict", map[string]string{"decision": "resume"}))
	require.False(t, ev.Has("verdict", map[string]string{"decision": "resume", "to": "paused"}))
	require.False(t, ev.Has("status", nil))
}

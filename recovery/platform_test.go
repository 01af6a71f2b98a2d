package recovery_test

import (
	"testing"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// What each platform makes of a crash (a running status found at start),
// a SIGTERM and a leave, for restartable work.
func TestEachPlatformDecidesAsItRestartsAndDrains(t *testing.T) {
	claim := storage.Claim{Owner: "pod-a", Epoch: 1}
	rec := storage.Record{ID: "ex-1", Status: state.Running.String(), Owner: "pod-a", Epoch: 1, UpdatedAt: t0, Since: t0}
	for _, tc := range []struct {
		platform recovery.Platform
		crash    recovery.Decision
		sigterm  recovery.ActionKind
		exit     int // of the SIGTERM
		leave    int
	}{
		{recovery.KubernetesJob, recovery.DecisionResume, recovery.ActionRelocate, 143, 143},
		{recovery.KubernetesDeployment, recovery.DecisionResume, recovery.ActionRelocate, 143, 0},
		{recovery.SystemdOnFailure, recovery.DecisionResume, recovery.ActionShutdown, 0, 143},
		{recovery.SystemdAlways, recovery.DecisionResume, recovery.ActionShutdown, 0, 0},
		{recovery.Unmanaged, recovery.DecisionFail, recovery.ActionShutdown, 0, 0},
		{recovery.Platform{}, recovery.DecisionFail, recovery.ActionShutdown, 0, 0},
	} {
		p := recovery.Policy{Platform: tc.platform, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}
		v, err := recovery.Startup(teraslice.Roles(), rec, p, t0)
		require.NoError(t, err)
		require.Equal(t, tc.crash, v.Decision, tc.platform.Name)
		a, err := recovery.Terminate(teraslice.Roles(), rec, claim, p)
		require.NoError(t, err)
		require.Equal(t, tc.sigterm, a.Kind, tc.platform.Name)
		require.Equal(t, tc.exit, a.ExitCode, tc.platform.Name)
		require.Equal(t, tc.leave, p.LeaveExitCode(), tc.platform.Name)
	}
	require.Equal(t, "on-failure", recovery.RestartOnFailure.String())
}

func TestAPlatformThatCannotBeIsRefused(t *testing.T) {
	for name, pl := range map[string]recovery.Platform{
		"drains and restarts nothing": {Name: "odd", Drains: true},
		"an unknown restart":          {Restart: 9},
		"an exit code above 255":      {Restart: recovery.RestartOnFailure, RelocateExitCode: 256},
	} {
		_, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Work: recovery.AsRecorded, Platform: pl})
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, name)
	}
}

// A policy on a platform that restarts or relocates controllers must say
// whether the work can resume: a forgotten Work is refused, naming the
// choices, not read as "not restartable".
func TestAForgottenWorkIsRefusedNamingTheChoices(t *testing.T) {
	for _, pl := range []recovery.Platform{recovery.KubernetesJob, recovery.KubernetesDeployment, recovery.SystemdOnFailure, recovery.SystemdAlways} {
		_, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: pl})
		require.ErrorIs(t, err, recovery.ErrInvalidPolicy, pl.Name)
		require.ErrorContains(t, err, "recovery.Restartability(true)", pl.Name)
		require.ErrorContains(t, err, "recovery.AsRecorded", pl.Name)
		_, err = recovery.NewDecider(teraslice.Roles(), recovery.Policy{Platform: pl, Work: recovery.AsRecorded})
		require.NoError(t, err, pl.Name)
	}
	_, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{})
	require.NoError(t, err, "a policy that resumes nothing needs no Work")
}

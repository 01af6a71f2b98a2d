package recovery_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// Roles rebuilt from their description, on the table rebuilt from its,
// decide as the originals do: a tool reading them from a store decides
// as the controller would.
func TestRolesRebuiltFromTheirDescriptionDecideTheSame(t *testing.T) {
	table, err := transition.Rebuild(teraslice.Lifecycle().Describe())
	require.NoError(t, err)
	d := teraslice.Roles().Describe()
	require.Equal(t, []recovery.EndDescription{{State: "relocating", Then: "initializing"}}, d.Relocating)
	require.Equal(t, []recovery.EndDescription{{State: "stopping", Then: "stopped"}}, d.Stopping)
	require.Equal(t, "failed", d.Failed)
	roles, err := recovery.RebuildRoles(table, d)
	require.NoError(t, err)
	require.Equal(t, d, roles.Describe())

	policies := []recovery.Policy{
		{},
		{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers},
		{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: recovery.Allowance{Count: 1, Window: time.Hour}},
	}
	for s := range state.All.All() {
		for k, p := range policies {
			rec := record(s)
			want, wantErr := recovery.Startup(teraslice.Roles(), rec, p, t0)
			got, gotErr := recovery.Startup(roles, rec, p, t0)
			require.Equal(t, wantErr == nil, gotErr == nil, "%s, policy %d", s, k)
			require.Equal(t, want.Decision, got.Decision, "%s, policy %d", s, k)
			require.Equal(t, want.To.String(), got.To, "%s, policy %d", s, k)
			require.Equal(t, want.Reason, got.Reason, "%s, policy %d", s, k)
		}
		wantEnd, wantErr := recovery.End(teraslice.Roles(), record(s), podA, recovery.Ending{Finished: true})
		gotEnd, gotErr := recovery.End(roles, record(s), podA, recovery.Ending{Finished: true})
		require.Equal(t, wantErr == nil, gotErr == nil, "%s", s)
		if wantErr == nil {
			require.Equal(t, wantEnd.Kind, gotEnd.Kind, "%s", s)
			require.Equal(t, wantEnd.To.String(), gotEnd.To, "%s", s)
		}
	}
}

func TestGivenTimersAreDescribedAndRebuilt(t *testing.T) {
	d := teraslice.Roles().Describe()
	require.NotEmpty(t, d.Timers, "scheduling and initializing have deadlines of their own")
	for _, dl := range d.Timers {
		_, err := time.ParseDuration(dl.After)
		require.NoError(t, err)
	}
	table, err := transition.Rebuild(teraslice.Lifecycle().Describe())
	require.NoError(t, err)
	roles, err := recovery.RebuildRoles(table, d)
	require.NoError(t, err)
	want := teraslice.Roles().Timers()
	got := roles.Timers()
	require.Len(t, got, len(want))
	for k, dl := range want {
		require.Equal(t, recovery.Timer[string]{State: dl.State.String(), After: dl.After, Then: dl.Then.String()}, got[k])
	}
	require.Equal(t, d, roles.Describe())
}

func TestARolesDescriptionThatDoesNotFitIsRefused(t *testing.T) {
	table, err := transition.Rebuild(teraslice.Lifecycle().Describe())
	require.NoError(t, err)
	good := teraslice.Roles().Describe()
	for name, edit := range map[string]func(d *recovery.RolesDescription){
		"unknown failed":     func(d *recovery.RolesDescription) { d.Failed = "gone" },
		"state without role": func(d *recovery.RolesDescription) { d.Running = d.Running[1:] },
		"bad duration":       func(d *recovery.RolesDescription) { d.Timers[0].After = "soon" },
		"half a relocation":  func(d *recovery.RolesDescription) { d.Relocating = []recovery.EndDescription{{State: "relocating"}} },
	} {
		d := good
		d.Running = append([]string(nil), good.Running...)
		d.Timers = append([]recovery.TimerDescription(nil), good.Timers...)
		edit(&d)
		_, err := recovery.RebuildRoles(table, d)
		require.ErrorIs(t, err, recovery.ErrInvalidRolesDescription, name)
	}
	_, err = recovery.RebuildRoles(nil, good)
	require.ErrorIs(t, err, recovery.ErrInvalidRolesDescription)
}

// A retention is described state by state, a zero one too (retired at
// once), and rebuilt to keep each state as long.
func TestRetentionsAreDescribedAndRebuilt(t *testing.T) {
	roles, err := recovery.DefineLifecycle(transition.New("queued")).
		NotStarted("queued").Running("rendering").Failed("failed").Ends("done", "cancelled").
		Retain(0, "cancelled").Retain(720*time.Hour, "failed").Build()
	require.NoError(t, err)
	d := roles.Describe()
	require.Equal(t, []recovery.RetainDescription{{State: "failed", After: "720h0m0s"}, {State: "cancelled"}}, d.Retain)
	table, err := transition.Rebuild(roles.Table().Describe())
	require.NoError(t, err)
	rebuilt, err := recovery.RebuildRoles(table, d)
	require.NoError(t, err)
	for _, s := range []string{"failed", "cancelled", "done"} {
		want, wantOK := roles.Retention(s)
		got, ok := rebuilt.Retention(s)
		require.Equal(t, wantOK, ok, s)
		require.Equal(t, want, got, s)
	}
	d.Retain = append(d.Retain, recovery.RetainDescription{State: "done", After: "a week"})
	_, err = recovery.RebuildRoles(table, d)
	require.ErrorIs(t, err, recovery.ErrInvalidRolesDescription)
	require.ErrorContains(t, err, `retention of "done"`)
}

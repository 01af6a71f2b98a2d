package recovery_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// Sim is a user's own state type: a VILLAS simulator's states, plus the
// relocating state its manager writes when it is moved.
type Sim string

const (
	SimIdle       Sim = "idle"
	SimStarting   Sim = "starting"
	SimRunning    Sim = "running"
	SimPaused     Sim = "paused"
	SimRelocating Sim = "relocating"
	SimStopping   Sim = "stopping"
	SimError      Sim = "error"
	SimGone       Sim = "gone"
)

func simBuilder() *transition.Builder[Sim] {
	return transition.New(SimIdle).
		Allow(SimIdle, SimStarting, SimGone).
		Allow(SimStarting, SimRunning, SimError, SimStopping, SimRelocating, SimGone).
		Allow(SimRunning, SimPaused, SimStopping, SimError, SimRelocating, SimGone).
		Allow(SimPaused, SimRunning, SimStopping, SimError, SimRelocating, SimGone).
		Return(SimRelocating, SimStarting, SimRunning, SimPaused).
		Allow(SimRelocating, SimIdle, SimError, SimStopping, SimGone).
		Allow(SimStopping, SimIdle, SimError, SimGone).
		Allow(SimError, SimIdle, SimGone).
		Terminal(SimGone)
}

func simTable(t *testing.T) *transition.Table[Sim] {
	t.Helper()
	table, err := simBuilder().Build()
	require.NoError(t, err)
	return table
}

func simRoles(t *testing.T, table *transition.Table[Sim]) *recovery.Roles[Sim] {
	t.Helper()
	roles, err := recovery.DefineRoles(table).
		NotStarted(SimIdle, SimError).
		Running(SimStarting, SimRunning, SimPaused).
		Relocating(SimRelocating, SimIdle).
		Stopping(SimStopping, SimIdle).
		Failed(SimError).
		Deadline(SimRelocating, 15*time.Minute, SimError).
		Deadline(SimStopping, 5*time.Minute, SimIdle).
		Build()
	require.NoError(t, err)
	return roles
}

func TestRolesOfAUserTable(t *testing.T) {
	roles := simRoles(t, simTable(t))
	for s, want := range map[Sim]recovery.Role{
		SimIdle: recovery.RoleNotStarted, SimError: recovery.RoleNotStarted,
		SimStarting: recovery.RoleRunning, SimRunning: recovery.RoleRunning, SimPaused: recovery.RoleRunning,
		SimRelocating: recovery.RoleRelocating, SimStopping: recovery.RoleStopping, SimGone: recovery.RoleTerminal,
	} {
		got, ok := roles.Role(s)
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	_, ok := roles.Role("exploded")
	require.False(t, ok)
	require.Equal(t, SimError, roles.Failed())
	require.Equal(t, []recovery.Timer[Sim]{
		{State: SimRelocating, After: teraslice.RelocatingDeadline, Then: SimError},
		{State: SimStopping, After: 5 * time.Minute, Then: SimIdle},
	}, roles.Timers())
}

// The execution lifecycle's roles agree with the status sets of package
// state, status by status.
func TestExecutionRolesAgreeWithTheStatusSets(t *testing.T) {
	roles := teraslice.Roles()
	for s := range state.All.All() {
		role, ok := roles.Role(s)
		require.True(t, ok, s)
		switch {
		case s.IsTerminal():
			require.Equal(t, recovery.RoleTerminal, role, s)
		case s.IsInit():
			require.Equal(t, recovery.RoleNotStarted, role, s)
		case s == state.Relocating:
			require.Equal(t, recovery.RoleRelocating, role, s)
		case s == state.Stopping:
			require.Equal(t, recovery.RoleStopping, role, s)
		default:
			require.True(t, state.RunningStatuses.Has(s), s)
			require.Equal(t, recovery.RoleRunning, role, s)
		}
	}
}

func TestRolesThatDoNotFitTheirTableAreRefusedWithEveryProblem(t *testing.T) {
	table := simTable(t)
	full := func() *recovery.RolesBuilder[Sim] {
		return recovery.DefineRoles(table).NotStarted(SimIdle, SimError).Running(SimStarting, SimRunning, SimPaused).
			Relocating(SimRelocating, SimIdle).Stopping(SimStopping, SimIdle)
	}
	// plain has a relocating state but no return edges, and starting
	// cannot reach gone.
	plain, err := transition.New(SimIdle).
		Allow(SimIdle, SimStarting).Allow(SimStarting, SimRunning, SimError, SimRelocating).
		Allow(SimRunning, SimError, SimRelocating, SimGone).Allow(SimRelocating, SimRunning, SimIdle, SimError).
		Allow(SimError, SimIdle, SimGone).Terminal(SimGone).Build()
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		b    *recovery.RolesBuilder[Sim]
		want string
	}{
		"nil table":             {recovery.DefineRoles[Sim](nil), "nil table"},
		"a state not in table":  {full().Failed(SimError).Running("warp"), `"warp" (running) is not a state of the table`},
		"a terminal given role": {full().Failed(SimError).NotStarted(SimGone), `"gone" is terminal in the table`},
		"two roles":             {full().Failed(SimError).Running(SimIdle), `"idle" is given two roles`},
		"a state without role":  {recovery.DefineRoles(table).NotStarted(SimIdle, SimError).Running(SimRunning, SimPaused).Relocating(SimRelocating, SimIdle).Stopping(SimStopping, SimIdle).Failed(SimError), `"starting" has no role: give it one (NotStarted, Running,`},
		"nothing running":       {recovery.DefineRoles(table).NotStarted(SimIdle, SimError, SimStarting, SimRunning, SimPaused).Relocating(SimRelocating, SimIdle).Stopping(SimStopping, SimIdle).Failed(SimError), "no state is running: name the states the work runs in with Running"},
		"no failure":            {full(), "no Failed state"},
		"failure is running":    {full().Failed(SimRunning), `Failed "running" must be a terminal, not-started or parked state`},
		"given twice":           {full().Failed(SimError).Failed(SimGone), "Failed is given twice"},
		"running reaches no failure": {
			recovery.DefineRoles(table).NotStarted(SimIdle, SimError).Running(SimStarting, SimRunning, SimPaused).
				Relocating(SimRelocating, SimIdle).Stopping(SimStopping, SimIdle).Failed(SimGone),
			"", // every running state can reach gone; see the next case for one that cannot
		},
		"running cannot fail": {
			recovery.DefineRoles(plain).NotStarted(SimIdle, SimError).Running(SimStarting, SimRunning).
				Relocating(SimRelocating, SimIdle).Failed(SimGone),
			`running "starting" cannot move to Failed "gone": add Allow("starting", "gone") to the table`,
		},
		"relocating without return edge": {
			recovery.DefineRoles(plain).NotStarted(SimIdle, SimError).Running(SimStarting, SimRunning).
				Relocating(SimRelocating, SimIdle).Failed(SimError),
			`running "starting" can move to Relocating "relocating", which has no return edge back to it: add Return("relocating", "starting") to the table`,
		},
		"relocating given twice": {
			full().Failed(SimError).Relocating(SimRelocating, SimRunning),
			`"relocating" is given the relocating role twice`,
		},
		"bad restart": {
			recovery.DefineRoles(table).NotStarted(SimIdle, SimError).Running(SimStarting, SimRunning, SimPaused).
				Relocating(SimRelocating, SimRunning).Stopping(SimStopping, SimIdle).Failed(SimError),
			`a relocation's fallback "running" must be a not-started state`,
		},
		"bad stop end": {
			recovery.DefineRoles(table).NotStarted(SimIdle, SimError).Running(SimStarting, SimRunning, SimPaused).
				Relocating(SimRelocating, SimIdle).Stopping(SimStopping, SimRunning).Failed(SimError),
			`Stopping's end "running" must be a terminal, not-started or parked state`,
		},
	} {
		roles, err := tc.b.Build()
		if tc.want == "" {
			require.NoError(t, err, name)
			require.NotNil(t, roles, name)
			continue
		}
		require.ErrorIs(t, err, recovery.ErrInvalidRoles, name)
		require.ErrorContains(t, err, tc.want, name)
		require.Nil(t, roles, name)
	}
}

// Every problem is listed at once, as transition.Builder lists a table's.
func TestRolesListEveryProblem(t *testing.T) {
	_, err := recovery.DefineRoles(simTable(t)).Running("warp").Build()
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	for _, want := range []string{`"warp" (running) is not a state`, `"idle" has no role`, `"paused" has no role`, "no Failed state"} {
		require.ErrorContains(t, err, want)
	}
}

// The decisions on a user's table, state by state, as the execution
// lifecycle's are tested: the table a VILLAS simulator manager lives by.
func TestDecisionsOnAUserTable(t *testing.T) {
	roles := simRoles(t, simTable(t))
	p := recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}
	rec := func(s Sim, previous Sim) storage.Record {
		return storage.Record{ID: "sim-1", Status: string(s), Previous: string(previous), Owner: "mgr-a", Epoch: 1,
			UpdatedAt: t0.Add(-time.Minute), Since: t0.Add(-time.Minute)}
	}
	for _, tc := range []struct {
		found, previous Sim
		decision        recovery.Decision
		to              Sim
		sigterm         recovery.ActionKind
	}{
		{SimIdle, "", recovery.DecisionStart, SimIdle, recovery.ActionShutdown},
		{SimError, "", recovery.DecisionStart, SimError, recovery.ActionShutdown},
		{SimStarting, "", recovery.DecisionResume, SimStarting, recovery.ActionRelocate},
		{SimRunning, "", recovery.DecisionResume, SimRunning, recovery.ActionRelocate},
		{SimPaused, "", recovery.DecisionResume, SimPaused, recovery.ActionRelocate},
		{SimRelocating, SimPaused, recovery.DecisionResume, SimPaused, recovery.ActionRelocate},
		{SimRelocating, "", recovery.DecisionResume, SimIdle, recovery.ActionRelocate},
		{SimStopping, "", recovery.DecisionStop, SimStopping, recovery.ActionShutdown},
		{SimGone, "", recovery.DecisionRefuse, SimGone, recovery.ActionShutdown},
	} {
		v, err := recovery.Startup(roles, rec(tc.found, tc.previous), p, t0)
		require.NoError(t, err)
		require.Equal(t, tc.decision, v.Decision, "startup in %s", tc.found)
		require.Equal(t, tc.to, v.To, "startup in %s", tc.found)
		a, err := recovery.Terminate(roles, rec(tc.found, tc.previous), storage.Claim{Owner: "mgr-a", Epoch: 1}, p)
		require.NoError(t, err)
		require.Equal(t, tc.sigterm, a.Kind, "SIGTERM in %s", tc.found)
	}
	// A crash past the budget fails into the roles' failure state.
	p.Failovers = recovery.Allowance{Count: 1, Window: time.Hour}
	crashed := rec(SimRunning, "")
	crashed.Meta = map[string]string{recovery.MetaFailovers: strconv.FormatInt(t0.Add(-time.Minute).UnixMilli(), 10)}
	v, err := recovery.Startup(roles, crashed, p, t0)
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionFail, v.Decision)
	require.Equal(t, SimError, v.To)
	// Past the stopping deadline the stop's end is written: idle.
	old := rec(SimStopping, "")
	old.Since = t0.Add(-time.Hour)
	v, err = recovery.Startup(roles, old, recovery.Policy{}, t0)
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionStop, v.Decision)
	require.Equal(t, SimIdle, v.To)
}

// A controller on its own table starts, relocates and is resumed through
// the same Decider as an execution controller: the compile error
// "cannot use *transition.Persisted[Phase] as *transition.Persisted[state.Status]"
// is gone.
func TestApplyOnAUserTable(t *testing.T) {
	table := simTable(t)
	roles := simRoles(t, table)
	store := storage.NewMemory()
	manager, err := transition.NewPersisted(table, store, "sim-1", transition.PersistedOptions{Actor: "operator"})
	require.NoError(t, err)
	_, err = manager.Create(context.Background(), transition.To(SimIdle))
	require.NoError(t, err)
	_, err = manager.Fire(context.Background(), SimStarting, "the manager starts it")
	require.NoError(t, err)
	_, err = manager.Fire(context.Background(), SimPaused, "")
	require.Error(t, err, "starting cannot pause")
	_, err = manager.Fire(context.Background(), SimRunning, "up")
	require.NoError(t, err)
	_, err = manager.Fire(context.Background(), SimPaused, "the user pauses it")
	require.NoError(t, err)

	p := recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}
	mgrA, err := transition.NewPersisted(table, store, "sim-1", transition.PersistedOptions{Actor: "mgr-a"})
	require.NoError(t, err)
	v, err := decider(t, roles, p).Start(context.Background(), mgrA, lease("mgr-a"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision, "a manager restarted while its simulator ran resumes it")
	a, err := decider(t, roles, p).Terminate(context.Background(), mgrA, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)
	cur, rec, err := manager.Load(context.Background())
	require.NoError(t, err)
	require.Equal(t, SimRelocating, cur)
	require.Equal(t, string(SimPaused), rec.Previous)

	mgrB, err := transition.NewPersisted(table, store, "sim-1", transition.PersistedOptions{Actor: "mgr-b"})
	require.NoError(t, err)
	v, err = decider(t, roles, p).Start(context.Background(), mgrB, lease("mgr-b"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionResume, v.Decision)
	require.Equal(t, SimPaused, v.To, "back to where it was relocated from")
	require.NoError(t, mgrB.Ownership().Release(context.Background()))
}

// Roles checked against one table refuse an execution on another.
func TestApplyRefusesRolesOfAnotherTable(t *testing.T) {
	roles := simRoles(t, simTable(t))
	other, err := transition.New(SimIdle).Allow(SimIdle, SimGone).Terminal(SimGone).Build()
	require.NoError(t, err)
	exec, err := transition.NewPersisted(other, storage.NewMemory(), "sim-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = decider(t, roles, recovery.Policy{}).Start(context.Background(), exec, lease("mgr-a"))
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)
	_, err = decider(t, roles, recovery.Policy{}).Terminate(context.Background(), exec, nil)
	require.ErrorIs(t, err, recovery.ErrInvalidRoles)

	// A table from the same builder with a guard added fits.
	guarded, err := simBuilder().Guard(SimIdle, SimStarting, func(context.Context, transition.Change[Sim], transition.View) error { return nil }).Build()
	require.NoError(t, err)
	exec, err = transition.NewPersisted(guarded, storage.NewMemory(), "sim-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = exec.Create(context.Background(), transition.To(SimIdle))
	require.NoError(t, err)
	v, err := decider(t, roles, recovery.Policy{}).Start(context.Background(), exec, lease("mgr-a"))
	require.NoError(t, err)
	require.Equal(t, recovery.DecisionStart, v.Decision)
	require.NoError(t, exec.Ownership().Release(context.Background()))
}

// The roles' deadlines are those given, none implied, checked when the
// roles are built.
func TestRolesDeadlinesAreGivenAndCheckedAtBuild(t *testing.T) {
	build := func(extra func(*recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim]) (*recovery.Roles[Sim], error) {
		b := recovery.DefineRoles(simTable(t)).
			NotStarted(SimIdle, SimError).
			Running(SimStarting, SimRunning, SimPaused).
			Relocating(SimRelocating, SimIdle).
			Stopping(SimStopping, SimIdle).
			Failed(SimError)
		return extra(b).Build()
	}
	roles, err := build(func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
		return b.Deadline(SimStarting, time.Minute, SimError).Deadline(SimStopping, time.Hour, SimIdle)
	})
	require.NoError(t, err)
	require.Equal(t, []recovery.Timer[Sim]{
		{State: SimStarting, After: time.Minute, Then: SimError},
		{State: SimStopping, After: time.Hour, Then: SimIdle},
	}, roles.Timers(), "no relocating deadline is implied")
	roles.Timers()[0].After = time.Hour
	require.Equal(t, time.Minute, roles.Timers()[0].After, "the caller's copy is its own")
	require.Equal(t, []recovery.Timer[Sim]{{State: SimStopping, After: time.Hour, Then: SimIdle}}, roles.TimersOf(SimStopping))

	roles, err = build(func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
		return b.Deadline(SimStarting, time.Minute, SimRunning).Deadline(SimStarting, time.Hour, SimError)
	})
	require.NoError(t, err, "a timer may move to a live state, and a state may have several")
	require.Len(t, roles.TimersOf(SimStarting), 2)

	for name, extra := range map[string]func(*recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim]{
		"to a relocating state": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Deadline(SimRunning, time.Minute, SimRelocating)
		},
		"a move the table does not have": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Deadline(SimIdle, time.Minute, SimPaused)
		},
		"not positive": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Deadline(SimStarting, 0, SimError)
		},
		"negative": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Deadline(SimStarting, -time.Minute, SimError)
		},
		"for a terminal state": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Deadline(SimGone, time.Minute, SimError)
		},
		"since a counter the table does not have": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Timer(recovery.Timer[Sim]{State: SimRunning, After: time.Hour, Since: "starts", Then: SimError})
		},
		"for a budget the roles do not give": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Timer(recovery.Timer[Sim]{State: SimIdle, Budget: "failures", Then: SimStarting})
		},
		"with a name no metadata key can carry": func(b *recovery.RolesBuilder[Sim]) *recovery.RolesBuilder[Sim] {
			return b.Timer(recovery.Timer[Sim]{State: SimRunning, Name: "Active Deadline", Then: SimError})
		},
	} {
		_, err := build(extra)
		require.ErrorIs(t, err, recovery.ErrInvalidRoles, name)
		require.ErrorContains(t, err, "timer", name)
		require.NotContains(t, err.Error(), "policy", "%s: a roles error says what is wrong with the roles, once: %v", name, err)
	}
}

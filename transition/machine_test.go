package transition_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

func newMachine(t testing.TB, table *transition.Table[SimState], opts transition.MachineOptions, observers ...transition.Observers[SimState]) *transition.Machine[SimState] {
	m, err := transition.NewMachine(table, opts, observers...)
	require.NoError(t, err)
	return m
}

func TestMachineFiresAllowedMovesAndRefusesOthers(t *testing.T) {
	m := newMachine(t, simTable(t), transition.MachineOptions{ID: "sim-1", Actor: "manager"})
	require.Equal(t, Idle, m.State())
	_, had := m.Previous()
	require.False(t, had)

	step, err := m.Fire(bg, Starting, "user asked")
	require.NoError(t, err)
	require.Equal(t, transition.Step[SimState]{From: Idle, To: Starting, Revision: 1}, step)
	require.True(t, step.Changed())

	_, err = m.Fire(bg, Paused, "too early")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	require.NotErrorIs(t, err, transition.ErrGuard)
	var te *transition.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, "starting", te.From)
	require.Equal(t, "paused", te.To)
	require.Equal(t, "sim-1", te.ID)
	require.Equal(t, Starting, m.State(), "a refused move changes nothing")

	prev, had := m.Previous()
	require.True(t, had)
	require.Equal(t, Idle, prev)
}

func TestMachineRefusesEveryMoveOutOfATerminalState(t *testing.T) {
	m, err := transition.NewMachineAt(simTable(t), Gone, transition.MachineOptions{})
	require.NoError(t, err)
	for _, to := range []SimState{Idle, Starting, Running, Errored} {
		_, err := m.Fire(bg, to, "")
		require.ErrorIs(t, err, transition.ErrNotAllowed)
		require.Contains(t, err.Error(), "gone is terminal")
	}
	c, err := m.Fire(bg, Gone, "again")
	require.NoError(t, err, "writing the current state is an idempotent success")
	require.False(t, c.Changed())
}

func TestMachineRefusesAStateTheTableDoesNotKnow(t *testing.T) {
	m := newMachine(t, simTable(t), transition.MachineOptions{})
	_, err := m.Fire(bg, "exploded", "")
	// A state the table lacks is a move it does not allow, and the error
	// is one a test can build and compare whole.
	require.Equal(t, &transition.Error{From: "idle", To: `"exploded"`, Reason: "not a state of the table"}, err)
	require.ErrorIs(t, err, transition.ErrNotAllowed)
	require.NotErrorIs(t, err, transition.ErrGuard)
}

func TestMachineGuardVetoUnwrapsToTheGuardsError(t *testing.T) {
	errNoLicense := errors.New("no simulator license")
	var seen []transition.Change[SimState]
	table, err := simBuilder().Guard(Idle, Starting, func(_ context.Context, c transition.Change[SimState], _ transition.View) error {
		seen = append(seen, c)
		if c.Reason != "licensed" {
			return errNoLicense
		}
		return nil
	}).Build()
	require.NoError(t, err)
	m := newMachine(t, table, transition.MachineOptions{Clock: func() time.Time { return time.Unix(100, 0) }})

	_, err = m.Fire(bg, Starting, "unlicensed")
	require.ErrorIs(t, err, transition.ErrGuard)
	require.ErrorIs(t, err, errNoLicense)
	require.NotErrorIs(t, err, transition.ErrNotAllowed)
	require.Equal(t, Idle, m.State())

	step, err := m.Fire(bg, Starting, "licensed")
	require.NoError(t, err)
	require.Equal(t, transition.Step[SimState]{From: Idle, To: Starting, Revision: 1}, step)
	require.Len(t, seen, 2)
	require.Equal(t, time.Unix(100, 0), seen[1].At, "a guarded move is stamped")
	require.Equal(t, uint64(0), seen[1].Revision, "a guard sees the revision it would replace")

	_, err = m.Fire(bg, Running, "no guard on this edge")
	require.NoError(t, err)
	require.Len(t, seen, 2)
}

// The Step Fire returns is the Change observers get, less what the
// caller already holds.
func TestMachineObserversGetTheWholeChangeFireReturnsItsStep(t *testing.T) {
	var seen []transition.Change[SimState]
	m := newMachine(t, simTable(t), transition.MachineOptions{ID: "sim-1", Actor: "manager", Clock: func() time.Time { return time.Unix(7, 0) }},
		transition.Observers[SimState]{OnChange: []func(transition.Change[SimState]){func(c transition.Change[SimState]) { seen = append(seen, c) }}})
	step, err := m.Fire(bg, Starting, "user asked")
	require.NoError(t, err)
	require.Equal(t, transition.Step[SimState]{From: Idle, To: Starting, Revision: 1}, step)
	require.Equal(t, []transition.Change[SimState]{{ID: "sim-1", From: Idle, To: Starting, Reason: "user asked", Actor: "manager", At: time.Unix(7, 0), Revision: 1}}, seen)

	again, err := m.Fire(bg, Starting, "asked twice")
	require.NoError(t, err)
	require.Equal(t, transition.Step[SimState]{From: Starting, To: Starting, Revision: 1}, again)
	require.False(t, again.Changed())
	require.Len(t, seen, 1, "a move to the current state is not a change")
}

func TestMachineTableWideGuardsRunFirst(t *testing.T) {
	var order []string
	table, err := simBuilder().
		Guard(Idle, Starting, func(context.Context, transition.Change[SimState], transition.View) error {
			order = append(order, "edge")
			return nil
		}).
		GuardAll(func(context.Context, transition.Change[SimState], transition.View) error {
			order = append(order, "all")
			return nil
		}).
		Build()
	require.NoError(t, err)
	_, err = newMachine(t, table, transition.MachineOptions{}).Fire(bg, Starting, "")
	require.NoError(t, err)
	require.Equal(t, []string{"all", "edge"}, order)
}

func TestMachineHonoursContextBeforeAndAfterGuards(t *testing.T) {
	done, cancel := context.WithCancel(bg)
	cancel()
	m := newMachine(t, simTable(t), transition.MachineOptions{})
	_, err := m.Fire(done, Starting, "")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, Idle, m.State())

	live, cancelLive := context.WithCancel(bg)
	table, err := simBuilder().Guard(Idle, Starting, func(context.Context, transition.Change[SimState], transition.View) error {
		cancelLive() // the caller gives up while the guard runs
		return nil
	}).Build()
	require.NoError(t, err)
	m = newMachine(t, table, transition.MachineOptions{})
	_, err = m.Fire(live, Starting, "")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, Idle, m.State(), "nothing is written once the context is done")

	//lint:ignore SA1012 the point is that a nil context is an error, not a panic
	_, err = m.Fire(nil, Starting, "") //nolint:staticcheck
	require.ErrorContains(t, err, "nil context")
}

func TestNewMachineRefusesBadOptions(t *testing.T) {
	table := simTable(t)
	_, err := transition.NewMachine(table, transition.MachineOptions{Actor: strings.Repeat("a", storage.MaxOwnerLen+1)})
	require.Error(t, err, "a huge actor")
	_, err = transition.NewMachine(table, transition.MachineOptions{}, transition.Observers[SimState]{OnChange: []func(transition.Change[SimState]){nil}})
	require.Error(t, err, "nil observer")
	_, err = transition.NewMachine[SimState](nil, transition.MachineOptions{})
	require.Error(t, err)
	_, err = transition.NewMachineAt(table, "nowhere", transition.MachineOptions{})
	require.ErrorIs(t, err, transition.ErrUnknownState)
	_, err = transition.NewMachineAt(nil, Idle, transition.MachineOptions{})
	require.Error(t, err)
}

func TestMachineObserversSeeEveryChangeInOrder(t *testing.T) {
	var got []string
	m := newMachine(t, simTable(t), transition.MachineOptions{}, transition.Observers[SimState]{OnChange: []func(transition.Change[SimState]){func(c transition.Change[SimState]) {
		got = append(got, fmt.Sprintf("1:%s>%s@%d", c.From, c.To, c.Revision))
	}, func(c transition.Change[SimState]) { got = append(got, fmt.Sprintf("2:%s>%s", c.From, c.To)) }}})
	for _, to := range []SimState{Starting, Starting, Running, Paused} {
		_, err := m.Fire(bg, to, "")
		require.NoError(t, err)
	}
	require.Equal(t, []string{
		"1:idle>starting@1", "2:idle>starting",
		"1:starting>running@2", "2:starting>running",
		"1:running>paused@3", "2:running>paused",
	}, got, "observers run in order, once per change, never for an idempotent write")
}

// An observer that fires the machine itself must not deadlock (looplab/fsm
// does), and its change is delivered after the one it is observing.
func TestMachineObserverMayFireTheMachineItObserves(t *testing.T) {
	var m *transition.Machine[SimState]
	var got []SimState
	m = newMachine(t, simTable(t), transition.MachineOptions{}, transition.Observers[SimState]{OnChange: []func(transition.Change[SimState]){func(c transition.Change[SimState]) {
		got = append(got, c.To)
		if c.To == Starting {
			_, err := m.Fire(bg, Running, "auto-start")
			require.NoError(t, err)
			require.Equal(t, Running, m.State())
		}
	}}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := m.Fire(bg, Starting, "")
		require.NoError(t, err)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Fire from inside an observer deadlocked")
	}
	require.Equal(t, []SimState{Starting, Running}, got)
}

// A panicking observer is recovered: the change stands, the caller gets
// no panic for it, the other observers still see it, and the panic is
// reported. (It went up to the caller of Fire, and the observers after
// the panicking one missed the change.)
func TestMachineObserverThatPanicsIsRecoveredAndTheOthersStillSeeTheChange(t *testing.T) {
	var first, second []SimState
	var panics []any
	m := newMachine(t, simTable(t), transition.MachineOptions{}, transition.Observers[SimState]{OnChange: []func(transition.Change[SimState]){
		func(c transition.Change[SimState]) {
			first = append(first, c.To)
			if c.To == Starting {
				panic("observer bug")
			}
		},
		func(c transition.Change[SimState]) { second = append(second, c.To) },
	},
		OnObserverPanic: func(c transition.Change[SimState], recovered any) {
			require.Equal(t, Starting, c.To)
			panics = append(panics, recovered)
		}})
	c, err := m.Fire(bg, Starting, "")
	require.NoError(t, err, "the change was made: no panic, no error")
	require.Equal(t, Starting, c.To)
	_, err = m.Fire(bg, Running, "")
	require.NoError(t, err)
	require.Equal(t, []SimState{Starting, Running}, first)
	require.Equal(t, []SimState{Starting, Running}, second, "the observer after the panicking one saw every change")
	require.Equal(t, []any{"observer bug"}, panics)
}

// The same holds for a Persisted, whose write is durable: the caller of
// Fire learns it succeeded, and a handler that panics itself is
// recovered too.
func TestPersistedObserverThatPanicsDoesNotTurnADurableWriteIntoAPanic(t *testing.T) {
	var seen []Job
	p, store := created(t, transition.PersistedOptions{}, transition.Observers[Job]{OnChange: []func(transition.Change[Job]){
		func(transition.Change[Job]) { panic("observer bug") },
		func(c transition.Change[Job]) { seen = append(seen, c.To) },
	},
		OnObserverPanic: func(transition.Change[Job], any) { panic("handler bug too") }})
	c, err := p.Fire(bg, Work, "")
	require.NoError(t, err)
	require.Equal(t, Work, c.To)
	require.Equal(t, "working", mustGet(t, store).Status)
	require.Equal(t, []Job{Queued, Work}, seen)
}

// Concurrent Fire calls are linearizable: along a chain of states, every
// step is taken by exactly one of the racing goroutines, and every other
// one either sees an idempotent success or is refused — never someone
// else's result.
func TestMachineConcurrentFireHasOneWinnerPerStep(t *testing.T) {
	const steps, racers = 200, 8
	b := transition.New(0)
	for k := range steps {
		b.Allow(k, k+1)
	}
	table, err := b.Terminal(steps).Build()
	require.NoError(t, err)
	var observed []int
	for _, observe := range []bool{false, true} {
		var observers transition.Observers[int]
		if observe {
			observed = nil
			observers.OnChange = []func(transition.Change[int]){func(c transition.Change[int]) { observed = append(observed, c.To) }}
		}
		m, err := transition.NewMachine(table, transition.MachineOptions{}, observers)
		require.NoError(t, err)
		var winners [steps + 1]atomic.Int32
		var wg sync.WaitGroup
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 1; k <= steps; k++ {
					c, err := m.Fire(bg, k, "")
					switch {
					case err != nil:
						// Someone is already past k: refused, not wrong.
						if !errors.Is(err, transition.ErrNotAllowed) {
							t.Errorf("step %d: %v", k, err)
						}
					case c.Changed():
						if c.From != k-1 || c.To != k || c.Revision != uint64(k) {
							t.Errorf("step %d: change %+v", k, c)
						}
						winners[k].Add(1)
					case c.To != k:
						t.Errorf("step %d: idempotent result for %d", k, c.To)
					}
				}
			}()
		}
		wg.Wait()
		require.Equal(t, steps, m.State())
		for k := 1; k <= steps; k++ {
			require.Equal(t, int32(1), winners[k].Load(), "step %d", k)
		}
		if observe {
			want := make([]int, steps)
			for k := range want {
				want[k] = k + 1
			}
			require.Equal(t, want, observed, "observers see changes in the order they happened")
		}
	}
}

func TestMachineFireWithoutGuardsOrObserversAllocatesNothing(t *testing.T) {
	table, err := transition.New(false).Allow(false, true).Allow(true, false).Build()
	require.NoError(t, err)
	m, err := transition.NewMachine(table, transition.MachineOptions{})
	require.NoError(t, err)
	to := true
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := m.Fire(bg, to, "toggle"); err != nil {
			panic(err)
		}
		to = !to
	})
	require.Zero(t, allocs)
	allocs = testing.AllocsPerRun(1000, func() { _ = table.Allowed(true, false) })
	require.Zero(t, allocs)
}

func ExampleMachine() {
	table, _ := transition.New("idle").
		Allow("idle", "running").
		Allow("running", "paused", "done").
		Allow("paused", "running", "done").
		Terminal("done").
		Build()
	m, _ := transition.NewMachine(table, transition.MachineOptions{}, transition.Observers[string]{OnChange: []func(transition.Change[string]){func(c transition.Change[string]) {
		fmt.Printf("%s → %s (%s)\n", c.From, c.To, c.Reason)
	}}})
	ctx := context.Background()
	_, _ = m.Fire(ctx, "running", "started")
	c, _ := m.Fire(ctx, "running", "started again")
	fmt.Println("changed:", c.Changed())
	_, err := m.Fire(ctx, "idle", "rewind")
	fmt.Println(errors.Is(err, transition.ErrNotAllowed))
	_, _ = m.Fire(ctx, "done", "finished")
	fmt.Println(m.State())
	// Output:
	// idle → running (started)
	// changed: false
	// true
	// running → done (finished)
	// done
}

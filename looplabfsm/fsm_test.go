package looplabfsm_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/looplabfsm"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
	"github.com/looplab/fsm"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const doorID = "door-1"

func doorTable(t testing.TB) *transition.Table[string] {
	t.Helper()
	table, err := looplabfsm.Table("closed", doorEvents())
	require.NoError(t, err)
	return table
}

func lease(holder string) storage.Lease {
	return storage.Lease{Holder: holder, TTL: 10 * time.Second}
}

// openDoor opens the door's FSM on store as holder.
func openDoor(t testing.TB, store storage.Store, holder string, callbacks fsm.Callbacks) *looplabfsm.FSM {
	t.Helper()
	p, err := transition.NewPersisted(doorTable(t), store, doorID, transition.PersistedOptions{Actor: holder, History: 50})
	require.NoError(t, err)
	door, err := looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: doorEvents(), Callbacks: callbacks, Lease: lease(holder)})
	require.NoError(t, err)
	t.Cleanup(func() {
		if own := door.Persisted().Ownership(); own != nil {
			_ = own.Release(context.Background())
		}
	})
	return door
}

func stored(t testing.TB, store storage.Store) storage.Record {
	t.Helper()
	rec, err := store.Get(context.Background(), doorID)
	require.NoError(t, err)
	return rec
}

func reasons(rec storage.Record) []string {
	var out []string
	for _, e := range rec.History.All() {
		out = append(out, e.Reason)
	}
	return out
}

func TestEveryCallbackSeesTheStoreAsLooplabOrdersThem(t *testing.T) {
	store := storage.NewMemory()
	var calls []string
	// Each callback notes the state the store holds when it runs.
	note := func(name string) fsm.Callback {
		return func(ctx context.Context, e *fsm.Event) {
			calls = append(calls, name+"@"+stored(t, store).Status)
		}
	}
	callbacks := fsm.Callbacks{}
	for _, name := range []string{"before_open", "before_event", "leave_closed", "leave_state", "enter_open", "enter_state", "after_open", "after_event"} {
		callbacks[name] = note(name)
	}
	door := openDoor(t, store, "pod-a", callbacks)
	require.NoError(t, door.Event(context.Background(), "open"))
	require.Equal(t, []string{
		"before_open@closed", "before_event@closed", "leave_closed@closed", "leave_state@closed",
		"enter_open@open", "enter_state@open", "after_open@open", "after_event@open",
	}, calls)
	require.Equal(t, "open", door.Current())

	rec := stored(t, store)
	last, _ := rec.History.Last()
	require.Equal(t, storage.Entry{From: "closed", To: "open", Reason: "open", Actor: "pod-a", Owner: "pod-a",
		Epoch: door.Persisted().Claim().Epoch, At: last.At, Revision: last.Revision}, last)
	require.Equal(t, []string{"created", "acquired", "open"}, reasons(rec))
}

func TestAnEventThatMovesNowhereWritesNothing(t *testing.T) {
	store := storage.NewMemory()
	door := openDoor(t, store, "pod-a", nil)
	before := stored(t, store)
	err := door.Event(context.Background(), "knock")
	var none fsm.NoTransitionError
	require.ErrorAs(t, err, &none)
	require.Equal(t, before.Revision, stored(t, store).Revision)
}

func TestACancelledEventWritesNothing(t *testing.T) {
	for _, name := range []string{"before_open", "before_event", "leave_closed", "leave_state"} {
		t.Run(name, func(t *testing.T) {
			store := storage.NewMemory()
			var entered bool
			door := openDoor(t, store, "pod-a", fsm.Callbacks{
				name:         func(_ context.Context, e *fsm.Event) { e.Cancel(errors.New("not now")) },
				"enter_open": func(context.Context, *fsm.Event) { entered = true },
			})
			before := stored(t, store)
			err := door.Event(context.Background(), "open")
			var cancelled fsm.CanceledError
			require.ErrorAs(t, err, &cancelled)
			require.ErrorContains(t, err, "not now")
			require.Equal(t, "closed", door.Current())
			require.False(t, entered)
			require.Equal(t, before.Revision, stored(t, store).Revision, "nothing written")
		})
	}
}

func TestAnEventTheStoreRefusesIsCancelled(t *testing.T) {
	t.Run("someone else moved the execution", func(t *testing.T) {
		store := storage.NewMemory()
		var entered bool
		door := openDoor(t, store, "pod-a", fsm.Callbacks{"enter_open": func(context.Context, *fsm.Event) { entered = true }})
		// An operator, writing without a claim as the cluster master does.
		operator, err := transition.NewPersisted(doorTable(t), store, doorID, transition.PersistedOptions{Actor: "operator"})
		require.NoError(t, err)
		_, err = operator.Fire(context.Background(), "locked", "maintenance")
		require.NoError(t, err)

		err = door.Event(context.Background(), "open")
		require.ErrorIs(t, err, storage.ErrConflict)
		var stale *looplabfsm.StaleError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, looplabfsm.StaleError{ID: doorID, Event: "open", Memory: "closed", Stored: "locked"}, *stale)
		require.Equal(t, "closed", door.Current(), "the machine did not move")
		require.False(t, entered)
		require.Equal(t, "locked", stored(t, store).Status)

		require.NoError(t, door.Sync(context.Background()))
		require.Equal(t, "locked", door.Current())
		require.NoError(t, door.Event(context.Background(), "unlock"))
		require.Equal(t, "closed", stored(t, store).Status)
	})
	t.Run("a successor took the execution over", func(t *testing.T) {
		store := storage.NewMemory()
		first := openDoor(t, store, "pod-a", nil)
		require.NoError(t, first.Persisted().Ownership().Release(context.Background()))
		second := openDoor(t, store, "pod-b", nil)
		require.Greater(t, second.Persisted().Claim().Epoch, first.Persisted().Claim().Epoch)

		err := first.Event(context.Background(), "open")
		require.ErrorIs(t, err, storage.ErrFenced)
		require.Equal(t, "closed", first.Current())
		require.Equal(t, "closed", stored(t, store).Status)
		require.NoError(t, second.Event(context.Background(), "open"))
		require.Equal(t, "pod-b", stored(t, store).Owner)
	})
	t.Run("the table's guard vetoes the move", func(t *testing.T) {
		store := storage.NewMemory()
		errAlarm := errors.New("the alarm is on")
		b := transition.New("closed")
		added := map[[2]string]bool{}
		for _, e := range doorEvents() {
			for _, src := range e.Src {
				if src != e.Dst && !added[[2]string{src, e.Dst}] {
					added[[2]string{src, e.Dst}] = true
					b.Allow(src, e.Dst)
				}
			}
		}
		table, err := b.Terminal("broken").Guard("closed", "open", func(context.Context, transition.Change[string], transition.View) error { return errAlarm }).Build()
		require.NoError(t, err)
		p, err := transition.NewPersisted(table, store, doorID, transition.PersistedOptions{})
		require.NoError(t, err)
		door, err := looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: doorEvents(), Lease: lease("pod-a")})
		require.NoError(t, err)
		defer func() { _ = door.Persisted().Ownership().Release(context.Background()) }()

		err = door.Event(context.Background(), "open")
		require.ErrorIs(t, err, transition.ErrGuard)
		require.ErrorIs(t, err, errAlarm)
		require.Equal(t, "closed", door.Current())
		require.NoError(t, door.Event(context.Background(), "lock"), "other moves go on")
	})
}

func TestALiveHolderIsRefused(t *testing.T) {
	store := storage.NewMemory()
	openDoor(t, store, "pod-a", nil)
	p, err := transition.NewPersisted(doorTable(t), store, doorID, transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: doorEvents(), Lease: lease("pod-b")})
	require.ErrorIs(t, err, storage.ErrHeld)
}

func TestARestartedProcessGetsItsMachineBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doors.db")
	run := func(holder string, events ...string) (*looplabfsm.FSM, storage.Record) {
		db, err := boltstore.Open(path, boltstore.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, db.Close()) }()
		store, err := db.Store("doors")
		require.NoError(t, err)
		p, err := transition.NewPersisted(doorTable(t), store, doorID, transition.PersistedOptions{Actor: holder})
		require.NoError(t, err)
		// A lease on the local clock lasts as long as the process, which
		// ends (with its DB) at the end of run.
		door, err := looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: doorEvents(), Lease: lease(holder)})
		require.NoError(t, err)
		for _, e := range events {
			require.NoError(t, door.Event(context.Background(), e))
		}
		rec := stored(t, store)
		require.NoError(t, door.Persisted().Ownership().Release(context.Background()))
		return door, rec
	}
	first, rec := run("pod-a", "open", "close", "lock")
	require.Equal(t, "locked", first.Current())
	require.Equal(t, "pod-a", rec.Owner)
	epoch := rec.Epoch

	second, rec := run("pod-b")
	require.Equal(t, "locked", second.Current(), "back where the first left it")
	require.Equal(t, "pod-b", rec.Owner)
	require.Greater(t, rec.Epoch, epoch)
	require.Equal(t, []string{"created", "acquired", "open", "close", "lock", "acquired"}, reasons(rec))
}

func TestAnAsynchronousTransitionIsWrittenWhenItCompletes(t *testing.T) {
	store := storage.NewMemory()
	var calls []string
	door := openDoor(t, store, "pod-a", fsm.Callbacks{
		"leave_closed": func(_ context.Context, e *fsm.Event) { e.Async() },
		"leave_state":  func(context.Context, *fsm.Event) { calls = append(calls, "leave_state") },
		"enter_open":   func(context.Context, *fsm.Event) { calls = append(calls, "enter_open@"+stored(t, store).Status) },
	})
	err := door.Event(context.Background(), "open")
	var async fsm.AsyncError
	require.ErrorAs(t, err, &async)
	require.Equal(t, "closed", door.Current())
	require.Equal(t, "closed", stored(t, store).Status, "nothing written before the transition completes")
	require.ErrorContains(t, door.Sync(context.Background()), "in transition")

	require.NoError(t, door.Transition(context.Background()))
	require.Equal(t, "open", door.Current())
	require.Equal(t, "open", stored(t, store).Status)
	// looplab/fsm does not call leave_state after a leave_<STATE> went
	// asynchronous; neither does the FSM.
	require.Equal(t, []string{"enter_open@open"}, calls)
	var none fsm.NotInTransitionError
	require.ErrorAs(t, door.Transition(context.Background()), &none)
}

func TestAnAsynchronousTransitionTheStoreRefusesStaysPending(t *testing.T) {
	store := storage.NewMemory()
	door := openDoor(t, store, "pod-a", fsm.Callbacks{
		"leave_closed": func(_ context.Context, e *fsm.Event) { e.Async() },
	})
	var async fsm.AsyncError
	require.ErrorAs(t, door.Event(context.Background(), "open"), &async)
	operator, err := transition.NewPersisted(doorTable(t), store, doorID, transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = operator.Fire(context.Background(), "broken", "vandals")
	require.NoError(t, err)

	err = door.Transition(context.Background())
	require.ErrorIs(t, err, storage.ErrConflict)
	require.Equal(t, "closed", door.Current(), "in transition, as looplab/fsm leaves it")
	require.Equal(t, "broken", stored(t, store).Status)
	var busy fsm.InTransitionError
	require.ErrorAs(t, door.Event(context.Background(), "lock"), &busy)
}

func TestFiringFromABeforeOrLeaveCallbackIsRefusedNotDeadlocked(t *testing.T) {
	for _, name := range []string{"before_open", "before_event", "leave_closed", "leave_state"} {
		t.Run(name, func(t *testing.T) {
			store := storage.NewMemory()
			var door *looplabfsm.FSM
			var nested error
			door = openDoor(t, store, "pod-a", fsm.Callbacks{
				name: func(ctx context.Context, e *fsm.Event) { nested = door.Event(ctx, "break") },
			})
			// A regression deadlocks: wait boundedly, and fail by name.
			done := make(chan error, 1)
			go func() { done <- door.Event(context.Background(), "open") }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("deadlocked: the event fired from the callback waits for the one in progress")
			}
			require.ErrorIs(t, nested, looplabfsm.ErrReentrant)
			require.Equal(t, "open", stored(t, store).Status)
		})
	}
}

func TestAnEventFiredFromAnEnterCallbackIsWrittenAfterIt(t *testing.T) {
	for _, how := range []string{"FSM.Event", "e.FSM.Event"} {
		t.Run(how, func(t *testing.T) {
			store := storage.NewMemory()
			var door *looplabfsm.FSM
			door = openDoor(t, store, "pod-a", fsm.Callbacks{
				"enter_open": func(ctx context.Context, e *fsm.Event) {
					var err error
					if how == "FSM.Event" {
						err = door.Event(ctx, "close")
					} else {
						err = e.FSM.Event(ctx, "close")
					}
					require.NoError(t, err)
				},
			})
			require.NoError(t, door.Event(context.Background(), "open"))
			require.Equal(t, "closed", door.Current())
			rec := stored(t, store)
			require.Equal(t, "closed", rec.Status)
			require.Equal(t, []string{"created", "acquired", "open", "close"}, reasons(rec))
		})
	}
}

func TestOpenRefusesEventsThatDoNotFitTheTable(t *testing.T) {
	store := storage.NewMemory()
	small, err := transition.New("closed").Allow("closed", "open").Allow("open", "closed").Build()
	require.NoError(t, err)
	p, err := transition.NewPersisted(small, store, doorID, transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: doorEvents()})
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	require.ErrorContains(t, err, `state "locked" is not a state of the table`)
	_, err = store.Get(context.Background(), doorID)
	require.ErrorIs(t, err, storage.ErrNotFound, "nothing created")

	withState, err := transition.New("closed").Allow("closed", "state").Allow("state", "closed").Build()
	require.NoError(t, err)
	p, err = transition.NewPersisted(withState, store, doorID, transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: fsm.Events{
		{Name: "go", Src: []string{"closed"}, Dst: "state"}, {Name: "back", Src: []string{"state"}, Dst: "closed"},
	}})
	require.ErrorContains(t, err, `a state named "state"`)
}

func TestBadInputGetsAnErrorNotAPanic(t *testing.T) {
	p, err := transition.NewPersisted(doorTable(t), storage.NewMemory(), doorID, transition.PersistedOptions{})
	require.NoError(t, err)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = looplabfsm.Open(nil, p, looplabfsm.Options{Events: doorEvents()})
	require.Error(t, err)
	_, err = looplabfsm.Open(context.Background(), nil, looplabfsm.Options{Events: doorEvents()})
	require.Error(t, err)
	_, err = looplabfsm.Open(context.Background(), &transition.Persisted[string]{}, looplabfsm.Options{Events: doorEvents()})
	require.Error(t, err)

	var zero looplabfsm.FSM
	require.Error(t, zero.Event(context.Background(), "open"))
	require.Error(t, zero.Transition(context.Background()))
	require.Error(t, zero.Sync(context.Background()))
	require.Empty(t, zero.Current())
	require.False(t, zero.Can("open"))
	require.Nil(t, zero.AvailableTransitions())

	door := openDoor(t, storage.NewMemory(), "pod-a", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, door.Event(ctx, "open"), context.Canceled)
	var unknown fsm.UnknownEventError
	require.ErrorAs(t, door.Event(context.Background(), "fly"), &unknown)
	require.True(t, slices.Contains(door.AvailableTransitions(), "open"))
}

// The store and the machine agree after any cancellation. A context
// cancelled right after the move is written (here by an observer, which
// runs between the write and looplab/fsm's last look at the context)
// does not leave the machine behind: once written, the move is made.
func TestAContextCancelledAfterTheWriteDoesNotLeaveTheMachineBehind(t *testing.T) {
	store := storage.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := transition.NewPersisted(doorTable(t), store, doorID, transition.PersistedOptions{Actor: "pod-a"}, transition.Observers[string]{OnChange: []func(transition.Change[string]){func(c transition.Change[string]) {
		if c.To == "open" {
			cancel()
		}
	}}})
	require.NoError(t, err)
	door, err := looplabfsm.Open(context.Background(), p, looplabfsm.Options{Events: doorEvents()})
	require.NoError(t, err)
	require.NoError(t, door.Event(ctx, "open"))
	require.Equal(t, "open", door.Current())
	require.Equal(t, "open", stored(t, store).Status)
	reopened := openDoor(t, store, "pod-b", nil)
	require.Equal(t, "open", reopened.Current(), "a restarted process gets the machine the first one had")
}

// A context cancelled while the before_ callbacks run cancels the event
// before anything is written, as looplab/fsm would.
func TestAContextCancelledBeforeTheWriteCancelsTheEvent(t *testing.T) {
	store := storage.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	door := openDoor(t, store, "pod-a", fsm.Callbacks{
		"before_open": func(context.Context, *fsm.Event) { cancel() },
	})
	err := door.Event(ctx, "open")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "closed", door.Current())
	require.Equal(t, "closed", stored(t, store).Status)
}

// looplab/fsm's own case: an asynchronous transition cancelled with
// AsyncError.CancelTransition is not made, and Transition returns nil.
// Through the bridge it is not written either: a restarted process finds
// the machine where it was.
func TestACancelledAsynchronousTransitionIsNotWritten(t *testing.T) {
	store := storage.NewMemory()
	door := openDoor(t, store, "pod-a", fsm.Callbacks{
		"leave_closed": func(_ context.Context, e *fsm.Event) { e.Async() },
	})
	var async fsm.AsyncError
	require.ErrorAs(t, door.Event(context.Background(), "open"), &async)
	async.CancelTransition()
	require.NoError(t, door.Transition(context.Background()))
	require.Equal(t, "closed", door.Current())
	require.Equal(t, "closed", stored(t, store).Status)
	require.NoError(t, door.Persisted().Ownership().Release(context.Background()))
	reopened := openDoor(t, store, "pod-b", nil)
	require.Equal(t, "closed", reopened.Current())
	require.NoError(t, reopened.Event(context.Background(), "open"), "the door opens normally afterwards")
}

// New builds the table and the Persisted from the definition alone, and
// refuses what either would.
func TestNewOpensFromTheDefinitionAlone(t *testing.T) {
	store := storage.NewMemory()
	door, err := looplabfsm.New(context.Background(), store, doorID, "closed", "pod-a", looplabfsm.Options{Events: doorEvents()})
	require.NoError(t, err)
	require.NoError(t, door.Event(context.Background(), "open"))
	rec := stored(t, store)
	require.Equal(t, "open", rec.Status)
	last, _ := rec.History.Last()
	require.Equal(t, "pod-a", last.Actor)

	_, err = looplabfsm.New(context.Background(), store, doorID, "", "pod-a", looplabfsm.Options{Events: doorEvents()})
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	_, err = looplabfsm.New(context.Background(), nil, doorID, "closed", "pod-a", looplabfsm.Options{Events: doorEvents()})
	require.Error(t, err)
}

// looplab/fsm's own TestContextInCallbacks, through the bridge: an enter_
// callback waits on its context while the caller cancels. The bridge
// gave callbacks a context it never cancelled, and Event never returned
// in 5 of 8 runs. The callback's context ends with the caller's, so
// Event returns, with the caller's error, whichever comes first (the
// cancel or the event), the machine and the store agreeing on where it
// is.
func TestACallbackWaitingOnItsContextReturnsWhenTheCallerGivesUp(t *testing.T) {
	events := fsm.Events{
		{Name: "run", Src: []string{"start"}, Dst: "end"},
		{Name: "finish", Src: []string{"end"}, Dst: "finished"},
		{Name: "reset", Src: []string{"end", "finished"}, Dst: "start"},
	}
	for run := range 50 {
		store := storage.NewMemory()
		released := make(chan struct{})
		m, err := looplabfsm.New(context.Background(), store, "job", "start", "ctl", looplabfsm.Options{Events: events, Callbacks: fsm.Callbacks{
			"enter_end": func(ctx context.Context, e *fsm.Event) {
				<-ctx.Done()
				close(released)
				if err := e.FSM.Event(ctx, "finish"); err != nil {
					e.Err = err
				}
			},
		}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		done := make(chan error, 1)
		go func() { done <- m.Event(ctx, "run") }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: Event did not return within 10s of its context's cancellation", run)
		}
		require.ErrorIs(t, err, context.Canceled, "run %d", run)
		rec, err := store.Get(context.Background(), "job")
		require.NoError(t, err)
		require.Equal(t, m.Current(), rec.Status, "run %d: the machine and the store agree", run)
		if rec.Status == "end" {
			select {
			case <-released:
			default:
				t.Fatalf("run %d: in end without its enter_ callback having run", run)
			}
		} else {
			require.Equal(t, "start", rec.Status, "run %d: cancelled before the write: nothing written", run)
		}
	}
}

// A before_ or leave_ callback waiting on its context returns when the
// caller gives up too, and then nothing is written: the move is not.
func TestALeaveCallbackWaitingOnItsContextWritesNothing(t *testing.T) {
	store := storage.NewMemory()
	waiting := make(chan struct{})
	door := openDoor(t, store, "pod-a", fsm.Callbacks{
		"leave_closed": func(ctx context.Context, e *fsm.Event) {
			close(waiting)
			<-ctx.Done()
		},
	})
	before := stored(t, store)
	deadline, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- door.Event(deadline, "open") }()
	<-waiting
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's own error")
	case <-time.After(10 * time.Second):
		t.Fatal("Event did not return within 10s of its deadline")
	}
	require.Equal(t, "closed", door.Current())
	require.Equal(t, before.Revision, stored(t, store).Revision, "nothing written")
}

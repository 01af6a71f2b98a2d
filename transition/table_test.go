package transition_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/transition"
	"github.com/execfsm/execfsm/transition/transitiontest"
	"github.com/stretchr/testify/require"
)

// SimState is a user-defined state type of the kind the module must serve:
// a string type, as VILLAScontroller's simulator states are.
type SimState string

const (
	Idle     SimState = "idle"
	Starting SimState = "starting"
	Running  SimState = "running"
	Paused   SimState = "paused"
	Stopping SimState = "stopping"
	Errored  SimState = "error"
	Gone     SimState = "gone"
)

func simBuilder() *transition.Builder[SimState] {
	return transition.New(Idle).
		Allow(Idle, Starting, Gone).
		Allow(Starting, Running, Errored, Stopping).
		Allow(Running, Paused, Stopping, Errored).
		Allow(Paused, Running, Stopping, Errored).
		Allow(Stopping, Idle, Errored, Gone).
		Allow(Errored, Idle, Gone).
		Terminal(Gone)
}

func simTable(t testing.TB) *transition.Table[SimState] {
	table, err := simBuilder().Build()
	require.NoError(t, err)
	return table
}

func TestBuildAcceptsAUserDefinedStringTable(t *testing.T) {
	table := simTable(t)
	require.Equal(t, Idle, table.Initial())
	require.Equal(t, 7, table.Len())
	require.True(t, table.Allowed(Running, Paused))
	require.False(t, table.Allowed(Paused, Starting))
	require.False(t, table.Allowed(Gone, Idle))
	require.False(t, table.Allowed("bogus", Idle))
	require.Equal(t, []SimState{Errored, Stopping, Paused}, table.Next(Running), "in the order states were first named")
	require.Nil(t, table.Next(Gone))
	require.Nil(t, table.Next("bogus"))
	s, err := table.Parse("error")
	require.NoError(t, err)
	require.Equal(t, Errored, s)
	_, err = table.Parse("Error")
	require.ErrorIs(t, err, transition.ErrUnknownState)
	require.Contains(t, err.Error(), "idle, starting")
	transitiontest.Check(t, table)
}

func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	require.ErrorIs(t, err, transition.ErrInvalidTable)
	var be *transition.BuildError
	require.ErrorAs(t, err, &be)
	return be.Problems
}

func TestBuildListsEveryProblemAtOnce(t *testing.T) {
	noop := func(context.Context, transition.Change[SimState], transition.View) error { return nil }
	for name, tc := range map[string]struct {
		b    *transition.Builder[SimState]
		want []string
	}{
		"unknown state": {
			transition.New(Idle).States(Idle, Gone).Allow(Idle, "gnoe").Allow(Idle, Gone).Terminal(Gone),
			[]string{`unknown state gnoe (not in States)`},
		},
		"state declared twice": {
			transition.New(Idle).States(Idle, Gone, Idle).Allow(Idle, Gone).Terminal(Gone),
			[]string{"state idle declared twice"},
		},
		"duplicate edge": {
			transition.New(Idle).Allow(Idle, Gone, Gone).Terminal(Gone),
			[]string{"duplicate edge idle → gone"},
		},
		"duplicate edge as return": {
			transition.New(Idle).Allow(Idle, Running, Gone).Allow(Running, Idle).Return(Running, Idle).Terminal(Gone),
			[]string{"duplicate edge running → idle"},
		},
		"self edge": {
			transition.New(Idle).Allow(Idle, Idle, Gone).Terminal(Gone),
			[]string{"self edge idle → idle"},
		},
		"edge out of terminal": {
			transition.New(Idle).Allow(Idle, Gone).Allow(Gone, Idle).Terminal(Gone),
			[]string{"edge gone → idle leaves terminal state gone"},
		},
		"unreachable": {
			transition.New(Idle).Allow(Idle, Gone).Allow(Paused, Gone).Terminal(Gone),
			[]string{"state paused is unreachable from initial state idle"},
		},
		"trap": {
			transition.New(Idle).Allow(Idle, Running, Gone).Allow(Running, Paused).Allow(Paused, Running).Terminal(Gone),
			[]string{"state running is a trap", "state paused is a trap"},
		},
		"trap in a cyclic table": {
			transition.New(Idle).Allow(Idle, Running).Allow(Running, Idle, Errored),
			[]string{"state error is a trap: the table has no terminal state"},
		},
		"return edge never taken": {
			transition.New(Idle).Allow(Idle, Running, Gone).Return(Running, Paused).Allow(Paused, Gone).Allow(Running, Gone).Terminal(Gone),
			[]string{"return edge running → paused can never be taken: paused has no edge into running"},
		},
		"guard on a missing edge": {
			transition.New(Idle).Allow(Idle, Gone).Terminal(Gone).Guard(Gone, Idle, noop),
			[]string{"guard on gone → idle, which is not an allowed edge"},
		},
		"guard naming unknown state": {
			transition.New(Idle).Allow(Idle, Gone).Terminal(Gone).Guard(Idle, "nowhere", noop),
			[]string{"guard on idle → nowhere names an unknown state"},
		},
		"nil guards": {
			transition.New(Idle).Allow(Idle, Gone).Terminal(Gone).Guard(Idle, Gone, nil).GuardAll(nil),
			[]string{"nil guard on idle → gone", "nil guard 0 in GuardAll"},
		},
		"empty text form": {
			transition.New(Idle).Allow(Idle, "").Terminal(""),
			[]string{`state "" (number 2 of States) has an empty text form`},
		},
		"many problems": {
			transition.New(Idle).Allow(Idle, Gone, Gone).Allow(Gone, Idle).Allow(Paused, Gone).Terminal(Gone),
			[]string{"duplicate edge", "leaves terminal state", "paused is unreachable"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			table, err := tc.b.Build()
			require.Nil(t, table)
			problems := problemsOf(t, err)
			require.Len(t, problems, len(tc.want), "%q", problems)
			for k, want := range tc.want {
				require.Contains(t, problems[k], want)
			}
		})
	}
}

// Stringer with colliding names: two states, one text form.
type coin int

func (c coin) String() string { return "coin" }

func TestBuildRefusesStatesThatShareATextForm(t *testing.T) {
	_, err := transition.New(coin(1)).Allow(coin(1), coin(2)).Terminal(coin(2)).Build()
	require.Contains(t, problemsOf(t, err)[0], `states 1 and 2 share the text form "coin"`)
}

func TestBuildRefusesTooManyStates(t *testing.T) {
	b := transition.New(0)
	for k := range transition.MaxStates {
		b.Allow(k, k+1)
	}
	_, err := b.Terminal(transition.MaxStates).Build()
	require.Contains(t, problemsOf(t, err)[0], "256 states, at most 255")
}

func TestBuildOnNilBuilderIsAnError(t *testing.T) {
	var b *transition.Builder[int]
	_, err := b.Build()
	require.ErrorIs(t, err, transition.ErrInvalidTable)
}

func TestCyclicTableWithoutTerminalStatesBuilds(t *testing.T) {
	table, err := transition.New(false).Allow(false, true).Allow(true, false).Build()
	require.NoError(t, err)
	require.True(t, table.Allowed(true, false))
	transitiontest.Check(t, table)
}

// States of several kinds index correctly: dense small integers, integers
// too large or negative for the dense index, and structs.
func TestTablesOfEveryComparableKindLookUpCorrectly(t *testing.T) {
	t.Run("small uint8", func(t *testing.T) { lookupCase(t, uint8(1), uint8(2), uint8(3), uint8(4)) })
	t.Run("negative int", func(t *testing.T) { lookupCase(t, -1, 5, 7, 6) })
	t.Run("int64 huge", func(t *testing.T) { lookupCase(t, int64(1)<<40, 2, 3, int64(1)<<41) })
	t.Run("int16 negative outside", func(t *testing.T) { lookupCase(t, int16(1), int16(2), int16(3), int16(-1)) })
	t.Run("uintptr", func(t *testing.T) { lookupCase(t, uintptr(9), 10, 4000, 4095) })
	t.Run("string", func(t *testing.T) { lookupCase(t, "a", "b", "c", "d") })
	type point struct{ x, y int }
	t.Run("struct", func(t *testing.T) { lookupCase(t, point{0, 1}, point{1, 0}, point{1, 1}, point{2, 2}) })
	t.Run("float", func(t *testing.T) { lookupCase(t, 0.5, 1.5, 2.5, 3.5) })
}

func lookupCase[S comparable](t *testing.T, a, b, c, outside S) {
	table, err := transition.New(a).Allow(a, b).Allow(b, c).Terminal(c).Build()
	require.NoError(t, err)
	require.True(t, table.Allowed(a, b))
	require.True(t, table.Allowed(b, c))
	require.False(t, table.Allowed(a, c))
	require.False(t, table.Allowed(c, a))
	require.False(t, table.Has(outside))
	require.False(t, table.Allowed(outside, a))
	require.False(t, table.Allowed(a, outside))
	require.True(t, table.Has(c))
	require.True(t, table.IsTerminal(c))
	require.False(t, table.IsTerminal(outside))
	name, ok := table.Name(b)
	require.True(t, ok)
	back, err := table.Parse(name)
	require.NoError(t, err)
	require.Equal(t, b, back)
	_, ok = table.Name(outside)
	require.False(t, ok)
}

func TestTableStatesIsACopy(t *testing.T) {
	table := simTable(t)
	states := table.States()
	states[0] = Gone
	require.Equal(t, Idle, table.States()[0])
}

func TestMermaidIsStableAndMarksReturnAndGuardedEdges(t *testing.T) {
	noop := func(context.Context, transition.Change[string], transition.View) error { return nil }
	table, err := transition.New("on").
		Allow("on", "moving", "off").
		Return("moving", "on").
		Allow("moving", "end").
		Guard("on", "off", noop).
		Allow("off", "end").
		Terminal("end").
		Build()
	require.NoError(t, err)
	want := `stateDiagram-v2
    state "end" as s3
    [*] --> on
    on --> moving
    on --> off: guarded
    moving --> on: return
    moving --> s3
    off --> s3
    s3 --> [*]
`
	require.Equal(t, want, table.Mermaid(), "end is a Mermaid keyword, so it gets an alias")
	require.Equal(t, table.Mermaid(), table.Mermaid())

	dot := table.DOT()
	require.Contains(t, dot, `n1 -> n0 [style=dashed, label="return"];`)
	require.Contains(t, dot, `n3 [label="end", shape=doublecircle];`)
	require.Contains(t, dot, `n0 -> n2 [label="guarded"];`)
	require.Equal(t, dot, table.DOT())
}

func TestMermaidAliasesStatesThatAreNotIdentifiers(t *testing.T) {
	table, err := transition.New("waiting room").Allow("waiting room", `say "hi"`).Terminal(`say "hi"`).Build()
	require.NoError(t, err)
	m := table.Mermaid()
	require.Contains(t, m, `state "waiting room" as s0`)
	require.Contains(t, m, `state "say 'hi'" as s1`)
	require.Contains(t, m, "s0 --> s1")
	require.Contains(t, table.DOT(), `label="say \"hi\""`)
}

// FuzzBuild feeds the builder random edge lists over up to 16 states. It
// must never panic; a table it accepts must hold exactly the declared
// edges and satisfy the invariants Build promises.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2}, uint16(1<<2))
	f.Add([]byte{0, 0}, uint16(0))
	f.Add([]byte{0, 1, 1, 0}, uint16(0))
	f.Add([]byte{0, 1, 1, 2, 2, 0, 1, 3, 0x81, 0}, uint16(1<<3))
	f.Fuzz(func(t *testing.T, edges []byte, terminal uint16) {
		if len(edges) > 512 {
			return
		}
		b := transition.New(0)
		declared := map[[2]int]bool{}
		returns := map[[2]int]bool{}
		for k := 0; k+1 < len(edges); k += 2 {
			from, to := int(edges[k]&0x0f), int(edges[k+1]&0x0f)
			if edges[k]&0x80 != 0 {
				b.Return(from, to)
				returns[[2]int{from, to}] = true
			} else {
				b.Allow(from, to)
			}
			declared[[2]int{from, to}] = true
		}
		for s := range 16 {
			if terminal&(1<<s) != 0 {
				b.Terminal(s)
			}
		}
		table, err := b.Build()
		if err != nil {
			require.ErrorIs(t, err, transition.ErrInvalidTable)
			require.NotEmpty(t, problemsOf(t, err))
			return
		}
		states := table.States()
		for _, a := range states {
			for _, c := range states {
				require.Equal(t, declared[[2]int{a, c}], table.Allowed(a, c), "%d → %d", a, c)
				require.Equal(t, returns[[2]int{a, c}], table.IsReturn(a, c))
			}
			if table.IsTerminal(a) {
				require.Empty(t, table.Next(a))
			}
		}
		require.Equal(t, 0, table.Initial())
		require.NotEmpty(t, table.Mermaid())
	})
}

func ExampleNew() {
	type Light string
	table, err := transition.New[Light]("green").
		Allow("green", "yellow").
		Allow("yellow", "red").
		Allow("red", "green", "broken").
		Allow("green", "broken").
		Allow("yellow", "broken").
		Terminal("broken").
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(table.Allowed("green", "yellow"), table.Allowed("green", "red"))
	fmt.Println(table.Next("red"))

	// A table with a dead end does not build.
	_, err = transition.New[Light]("green").Allow("green", "yellow").Allow("yellow", "broken").Allow("green", "off").Terminal("broken").Build()
	fmt.Println(errors.Is(err, transition.ErrInvalidTable))
	fmt.Println(strings.TrimPrefix(err.Error(), "transition: invalid table: "))
	// Output:
	// true false
	// [green broken]
	// true
	// state off is a trap: no terminal state can be reached from it
}

func TestPathIsAShortestLegalWalk(t *testing.T) {
	table := jobTable(t)
	require.Equal(t, []Job{Work, Done}, table.Path(Queued, Done))
	require.Equal(t, []Job{Broken}, table.Path(Hold, Broken))
	require.Nil(t, table.Path(Work, Work), "already there")
	require.Nil(t, table.Path(Done, Work), "nothing leaves a terminal state")
	require.Nil(t, table.Path(Work, "nowhere"))
	// moving returns only where it came from: Hold → Moving → Hold is a
	// walk, Work → Moving → Hold is not.
	require.Equal(t, []Job{Hold}, table.Path(Work, Hold))
	require.Equal(t, []Job{Work, Moving}, table.Path(Queued, Moving))

	// m returns only where it came from: entered from b it goes back to
	// b, so c is out of reach from b through it.
	rt, err := transition.New("a").Allow("a", "b", "c").Allow("b", "m", "z").Allow("c", "m", "z").
		Return("m", "b", "c").Allow("m", "z").Terminal("z").Build()
	require.NoError(t, err)
	require.Nil(t, rt.Path("b", "c"), "b → m → c would return to where m was not entered from")
	require.Equal(t, []string{"b", "m"}, rt.Path("a", "m"))
	for _, p := range [][]Job{table.Path(Queued, Hold), table.Path(Queued, Done), table.Path(Queued, Broken)} {
		m, err := transition.NewMachine(table, transition.MachineOptions{})
		require.NoError(t, err)
		for _, s := range p {
			_, err := m.Fire(context.Background(), s, "")
			require.NoError(t, err, "every step of %v is legal", p)
		}
	}
}

// Declared says what Allow and Return declared so far, so that code
// completing a table never declares a move twice.
func TestBuilderDeclaredSaysWhatWasDeclared(t *testing.T) {
	b := transition.New("a").Allow("a", "b").Return("c", "a")
	for _, tc := range []struct {
		from, to       string
		declared, back bool
	}{{"a", "b", true, false}, {"c", "a", true, true}, {"b", "a", false, false}, {"a", "c", false, false}} {
		declared, back := b.Declared(tc.from, tc.to)
		require.Equal(t, tc.declared, declared, "%s → %s", tc.from, tc.to)
		require.Equal(t, tc.back, back, "%s → %s", tc.from, tc.to)
	}
}

func TestLiveStatusesAreTheStatesThatHaveNotEnded(t *testing.T) {
	table, err := transition.New("queued").Allow("queued", "running").Allow("running", "done", "failed").
		Terminal("done", "failed").Build()
	require.NoError(t, err)
	require.Equal(t, []string{"queued", "running"}, table.LiveStatuses())
}

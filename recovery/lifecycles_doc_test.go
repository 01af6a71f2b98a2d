package recovery_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/execfsm/execfsm/flink"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	volcanojob "github.com/execfsm/execfsm/volcano"
	"github.com/stretchr/testify/require"
)

var updateLifecycles = flag.Bool("update-docs", false, "rewrite the generated sections of docs/lifecycles.md")

// lifecycleDoc is one lifecycle of docs/lifecycles.md: its roles, the
// policy its controllers decide with, and what it calls its states.
type lifecycleDoc[S comparable] struct {
	roles  *recovery.Roles[S]
	policy recovery.Policy
	prev   func(S) (S, bool) // the state a relocating one was entered from
}

// render is the lifecycle's generated section: what each decision makes
// of each state, then the table's moves, counts, budgets and timers.
func (l lifecycleDoc[S]) render() string {
	t := l.roles.Table()
	name := func(s S) string { n, _ := t.Name(s); return n }
	claim := storage.Claim{Owner: "ctl-a", Epoch: 1}
	var b strings.Builder
	b.WriteString("| state | role | a controller starting | its SIGTERM | the work failing | falls due |\n|---|---|---|---|---|---|\n")
	for _, s := range t.States() {
		role, _ := l.roles.Role(s)
		rec := storage.Record{ID: "ex", Status: name(s), Owner: claim.Owner, Epoch: claim.Epoch, Since: t0, UpdatedAt: t0,
			Meta: map[string]string{recovery.MetaRelocatable: "true"}}
		if back, ok := l.prev(s); ok {
			rec.Previous = name(back)
		}
		start := "—"
		if v, err := recovery.Startup(l.roles, rec, l.policy, t0); err == nil {
			start = l.outcome(v.Decision.String(), s, v.To)
		}
		sigterm := "—"
		if a, err := recovery.Terminate(l.roles, rec, claim, l.policy); err == nil {
			sigterm = a.Kind.String()
			if a.Kind == recovery.ActionRelocate && role != recovery.RoleRelocating {
				to, _ := l.roles.RelocatingFor(s)
				sigterm += " → " + name(to)
			}
		}
		failing := "—"
		if e, err := recovery.End(l.roles, rec, claim, recovery.Ending{Err: errors.New("failed")}); err == nil {
			failing = l.outcome(e.Kind.String(), s, e.To)
		} else if errors.Is(err, transition.ErrNotAllowed) {
			failing = "not allowed"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name(s), role, start, sigterm, failing, l.due(s))
	}
	b.WriteString("\nMoves:\n\n")
	for _, s := range t.States() {
		next := t.Next(s)
		if len(next) == 0 {
			continue
		}
		names := make([]string, len(next))
		for k, n := range next {
			names[k] = name(n)
			if t.IsReturn(s, n) {
				names[k] += " (return)"
			}
		}
		fmt.Fprintf(&b, "- %s → %s\n", name(s), strings.Join(names, ", "))
	}
	counted := map[string][]string{}
	var counters []string
	for _, c := range t.Describe().Counted {
		if _, ok := counted[c.Counter]; !ok {
			counters = append(counters, c.Counter)
		}
		counted[c.Counter] = append(counted[c.Counter], c.Edge.String())
	}
	if len(counters) > 0 {
		b.WriteString("\nCounted moves:\n\n")
		for _, c := range counters {
			fmt.Fprintf(&b, "- %s: %s\n", c, strings.Join(counted[c], ", "))
		}
	}
	if budgets := l.roles.Budgets(); len(budgets) > 0 {
		b.WriteString("\nBudgets:\n\n")
		for _, bud := range budgets {
			fmt.Fprintf(&b, "- %s: %s, backoff %s, then %s\n", bud.Counter, bud.Allowance, bud.Backoff, name(bud.Exhausted))
		}
	}
	return b.String()
}

// outcome says a decision and where it leaves s.
func (l lifecycleDoc[S]) outcome(what string, s, to S) string {
	if to == s {
		return what
	}
	n, _ := l.roles.Table().Name(to)
	return what + " → " + n
}

// due says what the timers and budgets of s do.
func (l lifecycleDoc[S]) due(s S) string {
	t := l.roles.Table()
	name := func(s S) string { n, _ := t.Name(s); return n }
	var parts []string
	for _, b := range l.roles.Budgets() {
		for _, from := range t.States() {
			if b.Exhausted != s && slices.Contains(t.Counters(from, s), b.Counter) {
				parts = append(parts, fmt.Sprintf("%s exhausted → %s", b.Counter, name(b.Exhausted)))
				break
			}
		}
	}
	for _, tm := range l.roles.TimersOf(s) {
		switch {
		case tm.Budget != "":
			parts = append(parts, fmt.Sprintf("after %s's backoff → %s", tm.Budget, name(tm.Then)))
		default:
			parts = append(parts, fmt.Sprintf("after %v → %s", tm.After, name(tm.Then)))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

// TestLifecyclesDocIsCurrent fails when a generated section of
// docs/lifecycles.md is not what the presets' roles decide; run with
// -update-docs to rewrite them.
func TestLifecyclesDocIsCurrent(t *testing.T) {
	const path = "../docs/lifecycles.md"
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	flinkRoles, err := flink.Roles(flink.RestartingFailed)
	require.NoError(t, err)
	none := func(volcanojob.Phase) (volcanojob.Phase, bool) { return "", false }
	sections := map[string]string{
		"teraslice": lifecycleDoc[state.Status]{roles: teraslice.Roles(),
			policy: recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers},
			prev: func(s state.Status) (state.Status, bool) {
				return state.Running, s == state.Relocating
			}}.render(),
		"volcano": lifecycleDoc[volcanojob.Phase]{roles: volcanojob.Roles(), policy: recovery.Policy{Manager: true}, prev: none}.render(),
		"flink": lifecycleDoc[flink.JobStatus]{roles: flinkRoles, policy: recovery.Policy{Manager: true},
			prev: func(flink.JobStatus) (flink.JobStatus, bool) { return "", false }}.render(),
	}
	for _, marker := range []string{"teraslice", "volcano", "flink"} {
		begin := fmt.Sprintf("<!-- generated: %s; go test ./recovery -run LifecyclesDoc -update-docs -->\n", marker)
		end := fmt.Sprintf("<!-- end %s -->", marker)
		b, e := strings.Index(doc, begin), strings.Index(doc, end)
		require.True(t, b >= 0 && e > b, "docs/lifecycles.md lacks the %s markers", marker)
		if *updateLifecycles {
			doc = doc[:b+len(begin)] + sections[marker] + doc[e:]
			continue
		}
		require.Equal(t, sections[marker], doc[b+len(begin):e], "docs/lifecycles.md's %s section is stale: go test ./recovery -run LifecyclesDoc -update-docs", marker)
	}
	if *updateLifecycles {
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
	}
}

package admin

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/transition"
	"github.com/goccy/go-graphviz"
)

// A diagram is the recorded table drawn as SVG, server-side, so that the
// page needs no script, and laid out by Graphviz's dot (layered, with
// crossing reduction and edges routed around the states), run in the
// process through go-graphviz: a placement written by hand drew edges
// through states and so showed moves that do not exist
// (docs/decisions/2026-12-07-admin-module.md). Each state is coloured by
// its role and shows how many records are in it.

// Role colours, as the pages' CSS has them: a diagram carries its own
// (Graphviz writes them into the SVG), so it reads the same outside the
// page.
var roleColour = map[string]string{
	"notstarted": "#64748b", "running": "#2563eb", "relocating": "#d97706", "stopping": "#ea580c",
	"parked": "#0891b2", "finishing": "#0d9488",
	"completed": "#16a34a", "failed": "#dc2626", "ended": "#475569", "foreign": "#7c3aed",
}

// diagramMaxName is how much of a state's name its box shows; the whole
// name is in its tooltip.
const diagramMaxName = 28

// layoutMu serializes the layouts of the process: go-graphviz runs one
// WebAssembly instance of Graphviz for the whole process (made when the
// package is initialized), and an instance runs one call at a time.
var layoutMu sync.Mutex

// diagrams lays tables out and keeps the last few layouts. A layout is
// made once per table, not per page: every layout grows the Graphviz
// instance's memory for good (about 55 KB for Teraslice's table,
// measured; docs/decisions/2026-12-07-admin-module.md), and a
// controller's pages are served for years. The counts, which change on
// every page, are written into a kept layout.
type diagrams struct {
	mu      sync.Mutex
	kept    []laidOut // the most recent last
	layouts int       // made, for tests
}

// keptLayouts is how many tables' layouts a handler keeps: the versions
// a rolling upgrade or a rollback goes through.
const keptLayouts = 4

type laidOut struct {
	dot string // what was laid out
	svg string // forPage's
}

// svg draws d's table with counts (records per status), as an SVG
// element for the page.
func (c *diagrams) svg(ctx context.Context, d schema.Document, counts map[string]int) (string, error) {
	dot := diagramDOT(d)
	svg, err := c.layout(ctx, dot, d.Name)
	if err != nil {
		return "", err
	}
	return withCounts(svg, d.Table.States, counts)
}

// layout returns the kept layout of dot, or lays it out.
func (c *diagrams) layout(ctx context.Context, dot, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range c.kept {
		if l.dot == dot {
			c.kept = append(append(c.kept[:i:i], c.kept[i+1:]...), l)
			return l.svg, nil
		}
	}
	svg, err := layOut(ctx, dot)
	if err != nil {
		return "", err
	}
	c.layouts++
	page, err := forPage(svg, name)
	if err != nil {
		return "", err
	}
	if len(c.kept) == keptLayouts {
		c.kept = c.kept[1:]
	}
	c.kept = append(c.kept, laidOut{dot: dot, svg: page})
	return page, nil
}

// layOut runs dot on a graph in DOT and returns its SVG.
func layOut(ctx context.Context, dot string) (string, error) {
	layoutMu.Lock()
	defer layoutMu.Unlock()
	gv, err := graphviz.New(ctx)
	if err != nil {
		return "", fmt.Errorf("admin: diagram: the layout engine: %w", err)
	}
	defer gv.Close()
	graph, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return "", fmt.Errorf("admin: diagram: the layout engine refused the table: %w", err)
	}
	defer graph.Close()
	var out bytes.Buffer
	if err := gv.Render(ctx, graph, graphviz.SVG, &out); err != nil {
		return "", fmt.Errorf("admin: diagram: the layout: %w", err)
	}
	return out.String(), nil
}

// countSlot is the second line of every state's label as it is laid out:
// room for a count of up to seven digits, written in by withCounts.
const countSlot = "0000000"

// withCounts writes each state's count into a laid-out diagram (none
// for a state not counted), in the
// last line of its label (the slot), found by the state's group: names
// reach the SVG escaped, so no name can end a group or a text early.
// Graphviz writes the groups in an order of its own.
func withCounts(svg string, states []string, counts map[string]int) (string, error) {
	type slot struct{ at, state int }
	slots := make([]slot, 0, len(states))
	for i := range states {
		group := strings.Index(svg, `<g id="s`+strconv.Itoa(i)+`" `)
		if group < 0 {
			return "", fmt.Errorf("admin: diagram: state %d is not in the layout", i)
		}
		at := strings.Index(svg[group:], ">"+countSlot+"</text>")
		if at < 0 {
			return "", fmt.Errorf("admin: diagram: state %d has no count in the layout", i)
		}
		slots = append(slots, slot{at: group + at + 1, state: i})
	}
	slices.SortFunc(slots, func(a, b slot) int { return a.at - b.at })
	var b strings.Builder
	b.Grow(len(svg))
	from := 0
	for _, sl := range slots {
		b.WriteString(svg[from:sl.at])
		if n, counted := counts[states[sl.state]]; counted {
			b.WriteString(strconv.Itoa(n))
		} // an ended status is not counted: its slot is left empty
		from = sl.at + len(countSlot)
	}
	b.WriteString(svg[from:])
	return b.String(), nil
}

// diagramDOT is d's table in DOT for dot: states by index (s0, s1, …),
// so that nothing of a name but its escaped label reaches the layout,
// edges as e<from>-<to> (r… for a return edge, dashed), the initial state
// marked by a dot, the terminal ones with a double border.
func diagramDOT(d schema.Document) string {
	states := d.Table.States
	index := make(map[string]int, len(states))
	for i, s := range states {
		index[s] = i
	}
	var b strings.Builder
	b.WriteString("digraph lifecycle {\n")
	// Monospace labels: dot sizes a box with its own metrics for
	// Courier, 0.6 em a character, which every monospace font the page
	// falls back to has too, so no name outgrows its box.
	b.WriteString(`graph [rankdir=LR, nodesep=0.35, ranksep=0.7, bgcolor="transparent", pad=0.2, fontname="Courier"];` + "\n")
	b.WriteString(`node [shape=box, style="rounded,filled", fontname="Courier", fontsize=12, fontcolor="white", margin="0.14,0.06", height=0.4];` + "\n")
	b.WriteString(`edge [color="#94a3b8", arrowsize=0.7, penwidth=1.2];` + "\n")
	if i, ok := index[d.Table.Initial]; ok {
		fmt.Fprintf(&b, "initial [id=\"initial\", class=\"initial\", shape=point, width=0.12, color=\"#0f172a\", label=\"\"];\ninitial -> s%d [id=\"e-initial\"];\n", i)
	}
	for i, s := range states {
		role := roleClass(d, s)
		colour := roleColour[role]
		extra := ""
		if slices.Contains(d.Table.Terminal, s) {
			extra = `, peripheries=2, penwidth=1.4`
		}
		fmt.Fprintf(&b, "s%d [id=\"s%d\", class=\"state %s\", label=%s, tooltip=%s, fillcolor=%q, color=%q%s];\n",
			i, i, role, dotString(cut(s)+"\n"+countSlot), dotString(s), colour, colour, extra)
	}
	var ends []string
	for _, s := range d.Table.Terminal {
		if i, ok := index[s]; ok {
			ends = append(ends, "s"+strconv.Itoa(i))
		}
	}
	if len(ends) > 0 {
		fmt.Fprintf(&b, "{rank=sink; %s}\n", strings.Join(ends, "; "))
	}
	for _, list := range []struct {
		edges  []transition.Edge
		prefix string
		attrs  string
	}{{d.Table.Edges, "e", ""}, {d.Table.Returns, "r", `, style=dashed, color="#d97706", class="return"`}} {
		for _, e := range list.edges {
			from, ok1 := index[e.From]
			to, ok2 := index[e.To]
			if !ok1 || !ok2 || from == to {
				continue
			}
			fmt.Fprintf(&b, "s%d -> s%d [id=\"%s%d-%d\", tooltip=%s%s];\n", from, to, list.prefix, from, to, dotString(e.From+" → "+e.To), list.attrs)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// dotString quotes s for DOT, where a label's backslash starts an escape
// (\N, \G, \l): every backslash and quote is escaped, and a line break
// but the one a label asks for (\n in s) is a space.
func dotString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < ' ' || r == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// svgStart finds the SVG element Graphviz writes, after its prolog: its
// size in points and its view box, and where its opening tag ends.
var svgStart = regexp.MustCompile(`<svg width="([0-9.]+)pt" height="([0-9.]+)pt"\s+viewBox="([-0-9. ]+)"[^>]*>`)

// svgOpening is the diagram's own opening tag, in place of Graphviz's:
// made with html/template, so the table's name is escaped as any text of
// the page is.
var svgOpening = template.Must(template.New("svg").Parse(`<svg class="diagram" role="img" aria-label="the states of table {{.Name}}" ` +
	`width="{{.Width}}" height="{{.Height}}" style="min-width: {{.MinWidth}}px" viewBox="{{.ViewBox}}" ` +
	`xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">`))

// forPage makes Graphviz's SVG document an element of the page: no XML
// prolog or doctype, a point of the layout a pixel of the page, shrunk
// to the page's width down to minDiagramScale (names of 7 px or more),
// past which a large table scrolls rather than shrinking to unreadable;
// named for assistive technology. Inside it, Graphviz escaped every name
// it wrote (diagramDOT quotes them for it), and the counts are digits.
func forPage(svg, name string) (string, error) {
	m := svgStart.FindStringSubmatchIndex(svg)
	if m == nil {
		return "", fmt.Errorf("admin: diagram: the layout engine wrote no SVG element")
	}
	width, height, viewBox := svg[m[2]:m[3]], svg[m[4]:m[5]], svg[m[6]:m[7]]
	w, err := strconv.ParseFloat(width, 64)
	if err != nil {
		return "", fmt.Errorf("admin: diagram: the layout's width %q: %w", width, err)
	}
	var b strings.Builder
	err = svgOpening.Execute(&b, struct{ Name, Width, Height, MinWidth, ViewBox string }{
		name, width, height, strconv.FormatFloat(w*minDiagramScale, 'f', 0, 64), viewBox})
	if err != nil {
		return "", fmt.Errorf("admin: diagram: %w", err)
	}
	return b.String() + svg[m[1]:], nil
}

// minDiagramScale is how far the page shrinks a diagram to fit.
const minDiagramScale = 0.6

// cut shortens a long name for its box.
func cut(name string) string {
	r := []rune(name)
	if len(r) <= diagramMaxName {
		return name
	}
	return string(r[:diagramMaxName-1]) + "…"
}

// roleClass is the CSS class of a status: its role, a terminal status
// told apart by what it means (completed, failed, other), or "foreign"
// for a status no version of the table has.
func roleClass(d schema.Document, status string) string {
	r := d.Roles
	switch {
	case status == r.Completed && status != "":
		return "completed"
	case status == r.Failed:
		return "failed"
	case slices.Contains(d.Table.Terminal, status):
		return "ended"
	case hasPath(r.Relocating, status):
		return "relocating"
	case hasPath(r.Stopping, status):
		return "stopping"
	case hasPath(r.Finishing, status):
		return "finishing"
	case slices.Contains(r.Parked, status):
		return "parked"
	case slices.Contains(r.Running, status):
		return "running"
	case slices.Contains(d.Table.States, status):
		return "notstarted"
	}
	if _, known := d.Knows(status); known {
		return "ended" // of an earlier version only: nothing writes it now
	}
	return "foreign"
}

// hasPath reports whether one of paths is status's.
func hasPath(paths []recovery.EndDescription, status string) bool {
	return slices.ContainsFunc(paths, func(e recovery.EndDescription) bool { return e.State == status })
}

package admin

import (
	"fmt"
	"html"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/transition"
)

// A diagram is the recorded table drawn as SVG, server-side, so that the
// page needs no script: states in columns from the initial one on
// (each after every state that leads to it, the terminal ones last),
// ordered in their column to keep edges short, each coloured by its role
// and showing how many records are in it.

// Diagram geometry, in SVG user units.
const (
	diagramMargin  = 24
	diagramNodeH   = 34
	diagramGapX    = 64
	diagramGapY    = 22
	diagramCharW   = 7.4 // of the 13px sans-serif the names are set in
	diagramMinW    = 96
	diagramMaxName = 28 // longer names are cut, whole in the tooltip
)

type diagramNode struct {
	name  string
	role  string // CSS class (roleClass)
	count int
	layer int
	row   int
	x, y  float64
}

// diagramSVG draws d's table with counts (records per status).
func diagramSVG(d schema.Document, counts map[string]int) string {
	states := d.Table.States
	index := make(map[string]int, len(states))
	for i, s := range states {
		index[s] = i
	}
	type edge struct {
		from, to int
		ret      bool
	}
	var edges []edge
	out := make([][]int, len(states))
	for _, list := range []struct {
		edges []transition.Edge
		ret   bool
	}{{d.Table.Edges, false}, {d.Table.Returns, true}} {
		for _, e := range list.edges {
			from, ok1 := index[e.From]
			to, ok2 := index[e.To]
			if !ok1 || !ok2 || from == to {
				continue
			}
			edges = append(edges, edge{from, to, list.ret})
			out[from] = append(out[from], to)
		}
	}
	terminal := make(map[int]bool)
	for _, s := range d.Table.Terminal {
		if i, ok := index[s]; ok {
			terminal[i] = true
		}
	}
	nodes := make([]diagramNode, len(states))
	layers := layerOf(len(states), index[d.Table.Initial], out, terminal)
	width := float64(diagramMinW)
	for i, s := range states {
		nodes[i] = diagramNode{name: s, role: roleClass(d, s), count: counts[s], layer: layers[i]}
		width = max(width, float64(len([]rune(cut(s))))*diagramCharW+56)
	}
	columns := orderColumns(nodes, out)
	tallest := 0
	for _, col := range columns {
		tallest = max(tallest, len(col))
	}
	for l, col := range columns {
		offset := float64(tallest-len(col)) * (diagramNodeH + diagramGapY) / 2
		for r, i := range col {
			nodes[i].row = r
			nodes[i].x = diagramMargin + float64(l)*(width+diagramGapX)
			nodes[i].y = diagramMargin + 40 + offset + float64(r)*(diagramNodeH+diagramGapY)
		}
	}
	w := 2*diagramMargin + float64(len(columns))*(width+diagramGapX) - diagramGapX
	h := 2*diagramMargin + 80 + float64(tallest)*(diagramNodeH+diagramGapY) - diagramGapY

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="diagram" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		w, h, w, h, html.EscapeString("the states of table "+d.Name))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>`)
	for _, e := range edges {
		a, z := nodes[e.from], nodes[e.to]
		class := "edge"
		if e.ret {
			class += " return"
		}
		var path string
		switch {
		case z.layer > a.layer:
			x1, y1 := a.x+width, a.y+diagramNodeH/2
			x2, y2 := z.x, z.y+diagramNodeH/2
			dx := (x2 - x1) / 2
			path = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x1, y1, x1+dx, y1, x2-dx, y2, x2, y2)
		case z.layer == a.layer:
			// Within a column: a bulge on its right, between the boxes.
			x, y1, y2 := a.x+width, a.y+diagramNodeH/2, z.y+diagramNodeH/2
			bulge := 18 + 0.25*abs(y1-y2)
			path = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x, y1, x+bulge, y1, x+bulge, y2, x, y2)
		default:
			// Back to an earlier column: an arc above.
			x1, y1 := a.x+width/2, a.y
			x2, y2 := z.x+width/2, z.y
			lift := 28 + 0.12*abs(x1-x2) + 0.5*abs(y1-y2)
			top := min(y1, y2) - lift
			path = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x1, y1, x1, top, x2, top, x2, y2)
		}
		fmt.Fprintf(&b, `<path class="%s" d="%s" marker-end="url(#arrow)"><title>%s</title></path>`,
			class, path, html.EscapeString(states[e.from]+" → "+states[e.to]))
	}
	for i, n := range nodes {
		fmt.Fprintf(&b, `<g class="node %s"><title>%s (%d)</title>`, n.role, html.EscapeString(n.name), n.count)
		if terminal[i] {
			fmt.Fprintf(&b, `<rect class="outer" x="%.1f" y="%.1f" width="%.1f" height="%d" rx="10"/>`, n.x-3, n.y-3, width+6, diagramNodeH+6)
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" rx="8"/>`, n.x, n.y, width, diagramNodeH)
		fmt.Fprintf(&b, `<text class="name" x="%.1f" y="%.1f">%s</text>`, n.x+12, n.y+diagramNodeH/2+4.5, html.EscapeString(cut(n.name)))
		fmt.Fprintf(&b, `<text class="count" x="%.1f" y="%.1f" text-anchor="end">%d</text>`, n.x+width-12, n.y+diagramNodeH/2+4.5, n.count)
		if n.name == d.Table.Initial {
			fmt.Fprintf(&b, `<circle class="initial" cx="%.1f" cy="%.1f" r="5"/>`, n.x-10, n.y+diagramNodeH/2)
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// cut shortens a long name for its box.
func cut(name string) string {
	r := []rune(name)
	if len(r) <= diagramMaxName {
		return name
	}
	return string(r[:diagramMaxName-1]) + "…"
}

// layerOf puts each state in the column of its distance from the
// initial state (the fewest moves that reach it: a lifecycle reads left
// to right as it is usually lived), states not reached after the others,
// and the terminal states in a last column of their own, where a reader
// looks for the ends.
func layerOf(n, initial int, out [][]int, terminal map[int]bool) []int {
	layer := make([]int, n)
	for v := range layer {
		layer[v] = -1
	}
	layer[initial] = 0
	queue := []int{initial}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range out[v] {
			if layer[w] < 0 {
				layer[w] = layer[v] + 1
				queue = append(queue, w)
			}
		}
	}
	last := 0
	for v := range n {
		if !terminal[v] {
			last = max(last, layer[v])
		}
	}
	for v := range n {
		switch {
		case terminal[v]:
			layer[v] = last + 2
		case layer[v] < 0:
			layer[v] = last + 1
		}
	}
	// Close the gaps the last two rules may leave.
	used := slices.Compact(slices.Sorted(slices.Values(layer)))
	for v := range layer {
		layer[v] = slices.Index(used, layer[v])
	}
	return layer
}

// orderColumns returns the states of each column, ordered so that each
// sits near the states it is linked to (a few sweeps of the barycenter
// heuristic), first in the table's order.
func orderColumns(nodes []diagramNode, out [][]int) [][]int {
	n := 0
	for _, v := range nodes {
		n = max(n, v.layer+1)
	}
	columns := make([][]int, n)
	for i, v := range nodes {
		columns[v.layer] = append(columns[v.layer], i)
	}
	linked := make([][]int, len(nodes))
	for v, ws := range out {
		for _, w := range ws {
			linked[v] = append(linked[v], w)
			linked[w] = append(linked[w], v)
		}
	}
	pos := make([]float64, len(nodes))
	place := func() {
		for _, col := range columns {
			for r, i := range col {
				pos[i] = float64(r) - float64(len(col)-1)/2
			}
		}
	}
	place()
	for sweep := range 8 {
		for k := range columns {
			l := k
			if sweep%2 == 1 {
				l = len(columns) - 1 - k
			}
			weight := make(map[int]float64, len(columns[l]))
			for _, i := range columns[l] {
				sum, count := 0.0, 0
				for _, j := range linked[i] {
					if nodes[j].layer != l {
						sum += pos[j]
						count++
					}
				}
				weight[i] = pos[i]
				if count > 0 {
					weight[i] = sum / float64(count)
				}
			}
			slices.SortStableFunc(columns[l], func(a, b int) int {
				switch {
				case weight[a] < weight[b]:
					return -1
				case weight[a] > weight[b]:
					return 1
				}
				return 0
			})
			place()
		}
	}
	return columns
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
	case status == r.Relocating && status != "":
		return "relocating"
	case status == r.Stopping && status != "":
		return "stopping"
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

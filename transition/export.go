package transition

import (
	"fmt"
	"strings"
)

// Mermaid returns the table as a Mermaid state diagram, stable for a given
// table (states and edges in declaration order), so it can be committed
// and compared. Return edges are labelled "return", guarded ones "guarded".
// States whose text form is not a plain identifier get an alias.
func (t *Table[S]) Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	ids := make([]string, t.n)
	for i, name := range t.names {
		if isIdent(name) {
			ids[i] = name
			continue
		}
		ids[i] = fmt.Sprintf("s%d", i)
		fmt.Fprintf(&b, "    state %q as %s\n", strings.ReplaceAll(name, `"`, "'"), ids[i])
	}
	if t.n > 0 {
		fmt.Fprintf(&b, "    [*] --> %s\n", ids[t.initial])
	}
	for i := range t.n {
		for j := range t.n {
			if label := t.edgeLabel(i, j); label != "-" {
				fmt.Fprintf(&b, "    %s --> %s", ids[i], ids[j])
				if label != "" {
					b.WriteString(": " + label)
				}
				b.WriteByte('\n')
			}
		}
	}
	for i := range t.n {
		if t.terminal[i] {
			fmt.Fprintf(&b, "    %s --> [*]\n", ids[i])
		}
	}
	return b.String()
}

// DOT returns the table as a Graphviz digraph, stable like [Table.Mermaid].
// Terminal states are double circles, return edges dashed.
func (t *Table[S]) DOT() string {
	var b strings.Builder
	b.WriteString("digraph transitions {\n    rankdir=LR;\n    node [shape=circle];\n")
	b.WriteString("    start [shape=point];\n")
	for i, name := range t.names {
		shape := ""
		if t.terminal[i] {
			shape = ", shape=doublecircle"
		}
		fmt.Fprintf(&b, "    n%d [label=%s%s];\n", i, dotQuote(name), shape)
	}
	if t.n > 0 {
		fmt.Fprintf(&b, "    start -> n%d;\n", t.initial)
	}
	for i := range t.n {
		for j := range t.n {
			label := t.edgeLabel(i, j)
			if label == "-" {
				continue
			}
			var attrs []string
			if t.edges[i*t.n+j]&edgeReturn != 0 {
				attrs = append(attrs, "style=dashed")
			}
			if label != "" {
				attrs = append(attrs, "label="+dotQuote(label))
			}
			fmt.Fprintf(&b, "    n%d -> n%d", i, j)
			if len(attrs) > 0 {
				b.WriteString(" [" + strings.Join(attrs, ", ") + "]")
			}
			b.WriteString(";\n")
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// edgeLabel is "-" for no edge, else the edge's label ("" for a plain one).
func (t *Table[S]) edgeLabel(i, j int) string {
	e := t.edges[i*t.n+j]
	if e == 0 {
		return "-"
	}
	var parts []string
	if e&edgeReturn != 0 {
		parts = append(parts, "return")
	}
	if e&edgeGuarded != 0 || len(t.anyGuard) > 0 {
		parts = append(parts, "guarded")
	}
	return strings.Join(parts, ", ")
}

// mermaidKeywords cannot be state ids in a Mermaid state diagram.
var mermaidKeywords = map[string]bool{
	"state": true, "note": true, "end": true, "direction": true, "class": true,
	"classDef": true, "style": true, "click": true, "as": true,
}

func isIdent(s string) bool {
	if s == "" || mermaidKeywords[s] {
		return false
	}
	for k, r := range s {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (k == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

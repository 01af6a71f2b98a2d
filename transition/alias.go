package transition

import (
	"slices"
	"unicode/utf8"
)

// addAliases records the other names Parse reads states from.
func (t *Table[S]) addAliases(aliases []aliasDecl[S], p *problems) {
	for _, a := range aliases {
		i, ok := t.known(a.state)
		if !ok {
			p.add("alias for %s, an unknown state", nameOf(a.state))
			continue
		}
		for _, name := range a.names {
			if j, taken := t.byName[name]; taken {
				p.add("alias %q of %s is the text form of %s", name, t.names[i], t.names[j])
				continue
			}
			if j, taken := t.aliases[name]; taken {
				if int(j) != i {
					p.add("alias %q is given to %s and %s", name, t.names[j], t.names[i])
				}
				continue
			}
			switch {
			case len(name) > MaxNameLen:
				p.add("alias %.32q… of %s has %d bytes, at most %d", name, t.names[i], len(name), MaxNameLen)
				continue
			case !utf8.ValidString(name):
				p.add("alias %q of %s is not valid UTF-8", name, t.names[i])
				continue
			}
			if t.aliases == nil {
				t.aliases = map[string]uint8{}
			}
			t.aliases[name] = uint8(i)
		}
	}
}

// Aliases returns the other names Parse reads s from ([Builder.Alias]),
// sorted.
func (t *Table[S]) Aliases(s S) []string {
	i, ok := t.lookup(s)
	if !ok {
		return nil
	}
	var out []string
	for name, j := range t.aliases {
		if int(j) == i {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

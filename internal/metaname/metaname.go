// Package metaname checks the names this module puts into record
// metadata keys (a counter's, a timer's), so that every key is a key of
// every store and reads the same in a URL, a label selector or a shell.
package metaname

import (
	"fmt"
	"strings"

	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// MaxLen bounds a name: with its prefix ("execfsm.count.") it stays well
// inside a metadata key (storage.MaxMetaKeyLen).
const MaxLen = 64

// Check says what is wrong with name, a what ("counter", "timer"): 1 to
// MaxLen bytes of lower-case letters, digits, '-', '_' and '.'.
func Check(what, name string) error {
	if name == "" || len(name) > MaxLen || strings.ContainsFunc(name, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.'
	}) {
		return fmt.Errorf("%s %s: want 1 to %d lower-case letters, digits, '-', '_' or '.'", what, quote.Limited(name), MaxLen)
	}
	return nil
}

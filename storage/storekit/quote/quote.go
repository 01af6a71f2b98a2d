// Package quote quotes untrusted text (ids, owner names, state names read
// from a store) for error messages, bounded so that a hostile megabyte
// never ends up in a log line.
package quote

import "fmt"

// maxQuotedBytes is how much of a text an error message shows.
const maxQuotedBytes = 64

// Limited quotes at most maxQuotedBytes of s, saying how long s was when
// it cut.
func Limited(s string) string {
	if len(s) > maxQuotedBytes {
		return fmt.Sprintf("%q… (%d bytes)", s[:maxQuotedBytes], len(s))
	}
	return fmt.Sprintf("%q", s)
}

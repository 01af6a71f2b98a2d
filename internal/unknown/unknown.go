// Package unknown holds the one error for a status or state name that
// names nothing a table or the vocabulary knows. Package state exports it
// as ErrUnknownStatus and package transition as ErrUnknownState, so that
// errors.Is matches either name whichever package refused the name:
// neither package imports the other.
package unknown

import "errors"

// ErrState is the error, wrapped by whoever refuses a name.
var ErrState = errors.New("unknown state")

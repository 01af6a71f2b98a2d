package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Sentinel errors. Match them with errors.Is, on a [StoreOperator]'s
// errors and on a [Client]'s alike.
var (
	// ErrInvalidRequest: the request cannot be done as given (a blank
	// reason, a status the table does not have, a bad page size). Ids
	// that are not ids match storage.ErrInvalidRecord instead, as they
	// do everywhere.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrNoStop: the recorded table has no stopping status, so its
	// executions are not stopped by request.
	ErrNoStop = errors.New("the table has no stopping status")
	// ErrCannotWatch: the store cannot say what changed
	// (storage.Watcher).
	ErrCannotWatch = errors.New("the store cannot watch")

	// ErrCannotBackup: the controller serves no backups
	// (HandlerOptions.Backup is not set).
	ErrCannotBackup = errors.New("the controller serves no backups")
	// ErrForbidden: the handler refused the request: writes without an
	// Authorizer, or the Authorizer said no.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthenticated: the Authorizer did not know who asked (it
	// returned an error matching this). Over HTTP it is a 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrUnavailable: the handler cannot serve the request now: it
	// serves as many watches as it allows ([HandlerOptions].MaxWatches),
	// or it is closed. Try again later, or elsewhere.
	ErrUnavailable = errors.New("unavailable")
	// ErrDropped: the handler ended a watch whose client did not take an
	// event in time ([HandlerOptions].WriteTimeout). A Client's watch
	// that ends early, for this or any other reason, matches it.
	ErrDropped = errors.New("watch dropped")
)

// The errors of requests no route or no reading of the body serves:
// a client that meets them was written against another API.
var (
	errNoRoute              = errors.New("no such path")
	errMethodNotAllowed     = errors.New("method not allowed")
	errUnsupportedMediaType = errors.New("unsupported media type")
)

// Error is a handler's answer to a request it did not do, as a [Client]
// gets it: the HTTP status, a code that says which kind of failure it is
// (see the package documentation), and the handler's message. errors.Is
// matches it against the sentinel of its code (storage.ErrNotFound for
// "not_found", transition.ErrNotAllowed for "not_allowed", …), so code
// that handles a StoreOperator's errors handles a Client's.
type Error struct {
	StatusCode int    // the HTTP status
	Code       string // "not_found", "forbidden", …
	Message    string // the handler's error, for people
}

func (e *Error) Error() string { return e.Message }

// Is matches e against the sentinel error of its code.
func (e *Error) Is(target error) bool {
	for _, k := range errorKinds {
		if k.code == e.Code && k.sentinel == target {
			return true
		}
	}
	return false
}

// errorKinds map the errors a handler can give to their status and code,
// most specific first; the first whose sentinel an error matches wins.
var errorKinds = []struct {
	sentinel error
	status   int
	code     string
}{
	{ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated"},
	{ErrForbidden, http.StatusForbidden, "forbidden"},
	{ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{ErrCannotWatch, http.StatusNotImplemented, "cannot_watch"},
	{ErrCannotBackup, http.StatusNotImplemented, "cannot_backup"},
	{ErrNoStop, http.StatusConflict, "no_stop"},
	{schema.ErrNoTable, http.StatusNotFound, "no_table"},
	{storage.ErrNotFound, http.StatusNotFound, "not_found"},
	{storage.ErrInvalidRecord, http.StatusBadRequest, "invalid"},
	{ErrInvalidRequest, http.StatusBadRequest, "invalid"},
	{errNoRoute, http.StatusNotFound, "no_route"},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed"},
	{errUnsupportedMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type"},
	{recovery.ErrForeignStatus, http.StatusConflict, "foreign_status"},
	{transition.ErrUnknownState, http.StatusConflict, "unknown_state"},
	{transition.ErrNotAllowed, http.StatusConflict, "not_allowed"},
	{transition.ErrGuard, http.StatusConflict, "guard"},
	{transition.ErrNotEnded, http.StatusConflict, "not_ended"},
	{storage.ErrHeld, http.StatusConflict, "held"},
	{errors.ErrUnsupported, http.StatusNotImplemented, "unsupported"},
	{storage.ErrConflict, http.StatusConflict, "conflict"},
	{storage.ErrCorrupt, http.StatusInternalServerError, "corrupt"},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "timeout"},
}

// statusOf returns the HTTP status and code of err.
func statusOf(err error) (int, string) {
	for _, k := range errorKinds {
		if errors.Is(err, k.sentinel) {
			return k.status, k.code
		}
	}
	return http.StatusInternalServerError, "internal"
}

// remoteError is an error a handler reported by its message alone (an
// unreadable record's), matching the sentinel it matched there.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string        { return e.msg }
func (e *remoteError) Is(target error) bool { return target == e.sentinel }

// corrupt is an unreadable record's error as a handler reported it.
func corrupt(msg string) error {
	if msg == "" {
		msg = fmt.Sprint(storage.ErrCorrupt)
	}
	return &remoteError{msg: msg, sentinel: storage.ErrCorrupt}
}

// maxQuoted is how much of a text from a request an error shows.
const maxQuoted = 64

// quoted quotes at most maxQuoted bytes of s, from a request, for an
// error: a hostile megabyte never ends up in a log line.
func quoted(s string) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q… (%d bytes)", s[:maxQuoted], len(s))
	}
	return fmt.Sprintf("%q", s)
}

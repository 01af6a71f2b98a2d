package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

// Verb names what a request does, for an [Authorizer].
type Verb string

// The verbs.
const (
	VerbTable Verb = "table" // read the recorded table (and draw it)
	VerbGet   Verb = "get"   // read one record, its audit trail included
	VerbList  Verb = "list"  // list records
	VerbWatch Verb = "watch" // stream records as they change
	VerbStop  Verb = "stop"  // ask an execution to stop
	// VerbDelete removes an execution's record for good: an ended one,
	// or a live one when forced (transition.Persisted.Delete).
	VerbDelete Verb = "delete"
	// VerbBackup copies the whole store (HandlerOptions.Backup): a read,
	// but of everything at once, so refused like a write without an
	// Authorizer.
	VerbBackup Verb = "backup"
)

// Writes reports whether the verb writes.
func (v Verb) Writes() bool { return v == VerbStop || v == VerbDelete }

// Operation is what a request asks, for an [Authorizer].
type Operation struct {
	Verb Verb
	// ID is the execution's id, for VerbGet, VerbStop and VerbDelete.
	ID string
	// Reason and Actor are VerbStop's and VerbDelete's: why, and the
	// name the client gives itself (which the request does not prove).
	Reason, Actor string
}

// Authorizer decides whether r may do a: a nil error lets it. For a
// write it also returns who the audit trail names as the actor: the
// identity it established (a client certificate's subject, a user a
// proxy authenticated), or a.Actor where it trusts the client to name
// itself; an empty actor for a write is refused. An error matching
// [ErrUnauthenticated] answers 401 (with the WWW-Authenticate header the
// Authorizer set, if any); any other error 403. Its message is sent to
// the client: say why, never a secret.
//
// It is called for every request, reads too; an Authorizer that allows
// every read keeps reads as open as they are without one.
type Authorizer func(r *http.Request, a Operation) (actor string, err error)

// HandlerOptions configure a [Handler]; the zero value serves reads and
// refuses writes.
type HandlerOptions struct {
	// Path is where the handler is mounted (the pattern it is registered
	// with): its links, forms and API are under it. Default "/"; it must
	// begin and end with a slash ("/admin/").
	Path string
	// Authorize, if set, decides every request (see [Authorizer]).
	// Without it reads are open and every write is refused (403): a
	// controller exposes writes only by saying who may make them.
	Authorize Authorizer
	// Timeout bounds each request's work on the store (a watch's stream
	// excepted). Default 10 s.
	Timeout time.Duration
	// MaxPage is the most records a page holds, and the page size when a
	// request names none. Default 500.
	MaxPage int
	// MaxWatches is how many watches the handler streams at once; one
	// more is refused with 503 (ErrUnavailable). Default 16.
	MaxWatches int
	// WriteTimeout is how long a watch's client has to take each event:
	// a client that does not read for longer is dropped, so that a slow
	// or stuck client never holds the controller's memory. Default 10 s.
	WriteTimeout time.Duration
	// Logger is told of dropped watches (Warn), failed requests (Warn),
	// a panicking request or a page that failed to render (Error): what
	// a controller's operator should see in its logs. Nil is
	// slog.Default(); slog.New(slog.DiscardHandler) logs nothing.
	Logger *slog.Logger
	// Serves is the table this controller decides with, as
	// schema.Describe(name, roles) gives it (not schema.Save's answer,
	// which is the newest recorded table even for an older controller).
	// With it the pages say which version of the recorded table the
	// controller serves, and a stop of an execution it would not act on
	// (a status of a newer version than its own, or a relocation back
	// to one: recovery.ErrForeignStatus) is refused unless forced. The
	// zero Document serves no table in particular.
	Serves schema.Document
	// Backup, if set, writes a backup of the controller's store to path
	// (a file that does not exist; the handler makes it in a directory
	// of its own and removes it once sent) and returns the revision it
	// is the store at, as boltstore's DB.Backup does: the way to back up
	// a bbolt file a controller holds, which no other process can open.
	// GET Path+"api/v1/backup" streams it, the revision in its
	// Execfsm-Revision header (the Authorizer must allow VerbBackup);
	// nil serves none (501 cannot_backup).
	Backup func(ctx context.Context, path string) (revision uint64, err error)
	// Archive, if set, keeps every record a delete through the handler
	// removes, with its trail, before it goes (archive.File; a failing
	// archive stops the delete); nil deletes without keeping.
	Archive storage.Archive
}

func (o HandlerOptions) withDefaults() (HandlerOptions, error) {
	if o.Path == "" {
		o.Path = "/"
	}
	if !strings.HasPrefix(o.Path, "/") || !strings.HasSuffix(o.Path, "/") {
		return o, fmt.Errorf("admin: NewHandler: Path %q must begin and end with a slash", o.Path)
	}
	for _, v := range []struct {
		name  string
		value int64
	}{{"Timeout", int64(o.Timeout)}, {"MaxPage", int64(o.MaxPage)}, {"MaxWatches", int64(o.MaxWatches)}, {"WriteTimeout", int64(o.WriteTimeout)}} {
		if v.value < 0 {
			return o, fmt.Errorf("admin: NewHandler: %s is negative", v.name)
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxPage == 0 {
		o.MaxPage = 500
	}
	if o.MaxWatches == 0 {
		o.MaxWatches = 16
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Handler is the admin endpoint of a controller: an http.Handler that
// serves the [Operator] of its store as JSON under Path+"api/v1/", and as
// HTML pages for people under Path. See the package documentation for
// what it serves and its security model.
type Handler struct {
	ops      *StoreOperator
	opts     HandlerOptions
	mux      *http.ServeMux
	csrf     *http.CrossOriginProtection
	watches  chan struct{} // a slot per watch being streamed
	diagrams diagrams

	// closed is done when Close is called: it ends the watches.
	closed context.Context
	close  context.CancelFunc
}

// NewHandler returns the admin handler of store, which must list its
// records (storage.Lister); it reads the table the store records
// (storage.TableKeeper) and watches it if it can (storage.Watcher).
// Register it on a mux at opts.Path, the path its links point to.
func NewHandler(store storage.Store, opts HandlerOptions) (*Handler, error) {
	ops, err := NewStoreOperator(store)
	if err != nil {
		return nil, fmt.Errorf("admin: NewHandler: %w", err)
	}
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Serves.Name != "" {
		if ops.serves, err = newServing(opts.Serves); err != nil {
			return nil, fmt.Errorf("admin: NewHandler: Serves: %w", err)
		}
	}
	h := &Handler{
		ops:     ops,
		opts:    opts,
		mux:     http.NewServeMux(),
		csrf:    http.NewCrossOriginProtection(),
		watches: make(chan struct{}, opts.MaxWatches),
	}
	h.closed, h.close = context.WithCancel(context.Background())
	h.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, fmt.Errorf("admin: %w: a cross-origin request may not write (the form is posted from the controller's own page)", ErrForbidden))
	}))
	p := opts.Path
	h.mux.HandleFunc("GET "+p+"api/v1/table", h.apiTable)
	h.mux.HandleFunc("GET "+p+"api/v1/executions", h.apiList)
	h.mux.HandleFunc("GET "+p+"api/v1/executions/{id}", h.apiGet)
	h.mux.HandleFunc("POST "+p+"api/v1/executions/{id}/stop", h.apiStop)
	h.mux.HandleFunc("POST "+p+"api/v1/executions/{id}/delete", h.apiDelete)
	h.mux.HandleFunc("GET "+p+"api/v1/watch", h.apiWatch)
	h.mux.HandleFunc("GET "+p+"api/v1/backup", h.apiBackup)
	h.mux.HandleFunc("GET "+p+"{$}", h.pageList)
	h.mux.HandleFunc("GET "+p+"executions/{id}", h.pageExecution)
	h.mux.HandleFunc("POST "+p+"executions/{id}/stop", h.pageStop)
	h.mux.HandleFunc("GET "+p+"diagram", h.pageDiagram)
	h.mux.HandleFunc("GET "+p+"assets/live.js", h.pageScript)
	// What no pattern above serves is answered in the shape of where
	// it was asked (JSON under the API, a page elsewhere), never with
	// net/http's plain text.
	h.mux.HandleFunc(p+"api/", h.noRoute)
	h.mux.HandleFunc(p, h.noRoute)
	return h, nil
}

// noRoute answers a request no route serves: 405 with the methods the
// path has (Allow), or 404.
func (h *Handler) noRoute(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != h.opts.Path && pattern != h.opts.Path+"api/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		h.fail(w, r, fmt.Errorf("admin: %w: nothing is served at %s", errNoRoute, quoted(r.URL.Path)))
		return
	}
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	h.fail(w, r, fmt.Errorf("admin: %w: %s is served for %s, not %s", errMethodNotAllowed, quoted(r.URL.Path),
		strings.Join(allowed, ", "), quoted(r.Method)))
}

// ServeHTTP implements http.Handler. A request that does not write is
// never refused for where it comes from; one that writes from another
// origin (a cross-site form) is, whatever the Authorizer says.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			// A bug in the handler must not take the controller down:
			// net/http would recover too, but drop the connection
			// without a word.
			h.opts.Logger.Error("admin: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
			h.fail(w, r, errors.New("admin: internal error"))
		}
	}()
	h.csrf.Handler(h.mux).ServeHTTP(w, r)
}

// Close ends the watches being streamed (their clients are told the
// handler is closed) and refuses new ones; everything else goes on being
// served. Call it before closing the store, or when the server shuts
// down: http.Server.Shutdown waits for handlers, and a watch does not
// end on its own.
func (h *Handler) Close() { h.close() }

// authorize asks the Authorizer, if any, and returns the actor of a
// write.
func (h *Handler) authorize(r *http.Request, a Operation) (string, error) {
	if h.opts.Authorize == nil {
		if a.Verb.Writes() {
			return "", fmt.Errorf("admin: %s: %w: this controller accepts no writes (it configured no authorizer)", a.Verb, ErrForbidden)
		}
		if a.Verb == VerbBackup {
			return "", fmt.Errorf("admin: %s: %w: this controller sends no copy of its whole store (it configured no authorizer)", a.Verb, ErrForbidden)
		}
		return "", nil
	}
	actor, err := h.opts.Authorize(r, a)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return "", err
	case err != nil:
		return "", fmt.Errorf("admin: %s: %w: %w", a.Verb, ErrForbidden, err)
	case a.Verb.Writes() && strings.TrimSpace(actor) == "":
		return "", fmt.Errorf("admin: %s: %w: the authorizer named nobody to write as", a.Verb, ErrForbidden)
	}
	return actor, nil
}

// context bounds a request's work on the store.
func (h *Handler) context(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

// wireError is the body of a failed API request.
type wireError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func errorBody(err error) (int, wireError) {
	status, code := statusOf(err)
	var body wireError
	body.Error.Code, body.Error.Message = code, err.Error()
	return status, body
}

// fail answers a request that failed: JSON under the API, a page
// elsewhere.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorBody(err)
	if status >= 500 {
		h.opts.Logger.Warn("admin: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	if strings.HasPrefix(r.URL.Path, h.opts.Path+"api/") {
		writeJSON(w, status, body)
		return
	}
	h.errorPage(w, r, status, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away: nobody to tell
}

func (h *Handler) apiTable(w http.ResponseWriter, r *http.Request) {
	if _, err := h.authorize(r, Operation{Verb: VerbTable}); err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	d, err := h.ops.Table(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (h *Handler) apiGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.authorize(r, Operation{Verb: VerbGet, ID: id}); err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	rec, err := h.ops.Get(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// listOptions reads a listing's query: status (repeated or
// comma-separated), q (the ids containing it), cursor, limit.
func (h *Handler) listOptions(r *http.Request) (ListOptions, error) {
	q := r.URL.Query()
	opts := ListOptions{Cursor: q.Get("cursor"), IDContains: strings.TrimSpace(q.Get("q")), Limit: h.opts.MaxPage}
	for _, v := range q["status"] {
		for s := range strings.SplitSeq(v, ",") {
			opts.Statuses = append(opts.Statuses, strings.TrimSpace(s))
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > h.opts.MaxPage {
			return opts, fmt.Errorf("admin: list: %w: limit %q: want 1 to %d", ErrInvalidRequest, v, h.opts.MaxPage)
		}
		opts.Limit = n
	}
	return opts, nil
}

// list does a list request, the API's or a page's: authorized, its
// query read, the table the store records read (nil for none), the page
// listed. It returns false when it answered the request with a failure.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) (Page, ListOptions, *schema.Document, bool) {
	if _, err := h.authorize(r, Operation{Verb: VerbList}); err != nil {
		h.fail(w, r, err)
		return Page{}, ListOptions{}, nil, false
	}
	opts, err := h.listOptions(r)
	if err != nil {
		h.fail(w, r, err)
		return Page{}, opts, nil, false
	}
	ctx, cancel := h.context(r)
	defer cancel()
	table, err := h.ops.table(ctx)
	if err == nil {
		var p Page
		if p, err = h.ops.listIn(ctx, table, opts); err == nil {
			return p, opts, table, true
		}
	}
	h.fail(w, r, err)
	return Page{}, opts, nil, false
}

func (h *Handler) apiList(w http.ResponseWriter, r *http.Request) {
	if p, _, _, ok := h.list(w, r); ok {
		writeJSON(w, http.StatusOK, p)
	}
}

// maxStopBody bounds a stop's body: a reason and an actor at their
// largest, in JSON, fit.
const maxStopBody = 64 << 10

// stopBody is the body of a stop request.
type stopBody struct {
	Reason string `json:"reason"`
	Actor  string `json:"actor,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

// requireType refuses a request whose body is not of the media type
// want: a body is read as what it says it is, and a text/plain one (which
// any page may post cross-site without asking) is not a stop.
func requireType(r *http.Request, want string) error {
	got := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(got); err != nil || mt != want {
		return fmt.Errorf("%w: the body must be %s, not %s", errUnsupportedMediaType, want, quoted(got))
	}
	return nil
}

// apiStop stops an execution: a body that is not exactly one JSON
// object of a stop, sent as application/json, writes nothing.
func (h *Handler) apiStop(w http.ResponseWriter, r *http.Request) {
	body, err := decodeWriteBody(w, r, "stop")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	stopped, err := h.stop(r, StopRequest{ID: r.PathValue("id"), Reason: body.Reason, Actor: body.Actor, Force: body.Force})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stopped)
}

// decodeWriteBody reads the JSON body of a stop or a delete (what):
// one object of stopBody's fields, nothing else.
func decodeWriteBody(w http.ResponseWriter, r *http.Request, what string) (stopBody, error) {
	var body stopBody
	if err := requireType(r, "application/json"); err != nil {
		return body, fmt.Errorf("admin: %s: %w", what, err)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxStopBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return body, fmt.Errorf("admin: %s: %w: the body is not {\"reason\": …, \"actor\": …, \"force\": …}: %v", what, ErrInvalidRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return body, fmt.Errorf("admin: %s: %w: the body holds more than one JSON object", what, ErrInvalidRequest)
	}
	return body, nil
}

// stop authorizes a stop, and makes it as the actor the Authorizer
// names.
func (h *Handler) stop(r *http.Request, req StopRequest) (Stopped, error) {
	if err := storage.ValidateID(req.ID); err != nil {
		return Stopped{}, fmt.Errorf("admin: stop: %w", err)
	}
	actor, err := h.authorize(r, Operation{Verb: VerbStop, ID: req.ID, Reason: req.Reason, Actor: req.Actor})
	if err != nil {
		return Stopped{}, err
	}
	req.Actor = actor
	ctx, cancel := h.context(r)
	defer cancel()
	return h.ops.Stop(ctx, req)
}

func (h *Handler) apiWatch(w http.ResponseWriter, r *http.Request) {
	if _, err := h.authorize(r, Operation{Verb: VerbWatch}); err != nil {
		h.fail(w, r, err)
		return
	}
	ids := r.URL.Query()["id"]
	for _, id := range ids {
		if err := storage.ValidateID(id); err != nil {
			h.fail(w, r, fmt.Errorf("admin: watch: %w", err))
			return
		}
	}
	if h.ops.watcher == nil {
		h.fail(w, r, fmt.Errorf("admin: watch: %w: %T", ErrCannotWatch, h.ops.store))
		return
	}
	if h.closed.Err() != nil {
		h.fail(w, r, fmt.Errorf("admin: watch: %w: the handler is closed", ErrUnavailable))
		return
	}
	select {
	case h.watches <- struct{}{}:
		defer func() { <-h.watches }()
	default:
		h.fail(w, r, fmt.Errorf("admin: watch: %w: this controller streams %d watches already", ErrUnavailable, h.opts.MaxWatches))
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil {
		// Without a deadline, a client that stops reading would hold
		// this handler for ever.
		h.fail(w, r, fmt.Errorf("admin: watch: the response cannot be bounded in time (%w): a middleware hides net/http's ResponseWriter; give it an Unwrap method", err))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.closed, cancel)
	defer stop()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil { // the client knows it watches before the first event
		return
	}
	enc := json.NewEncoder(w)
	send := func(v any) error {
		if err := rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil {
			return err
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
		return rc.Flush()
	}
	for ev, err := range h.ops.Watch(ctx, ids...) {
		if err != nil {
			_, body := errorBody(err)
			_ = send(body)
			return
		}
		if err := send(eventWire(ev)); err != nil {
			h.opts.Logger.Warn("admin: a watch's client did not take an event in time: dropped", "remote", r.RemoteAddr, "err", err)
			return
		}
	}
	if r.Context().Err() == nil { // Close ended it, not the client
		_, body := errorBody(fmt.Errorf("admin: watch: %w: the handler is closed", ErrUnavailable))
		_ = send(body)
	}
}

// apiBackup streams a backup HandlerOptions.Backup makes. It takes as
// long as the copy takes: the request's own context bounds it, not
// Timeout.
func (h *Handler) apiBackup(w http.ResponseWriter, r *http.Request) {
	if _, err := h.authorize(r, Operation{Verb: VerbBackup}); err != nil {
		h.fail(w, r, err)
		return
	}
	if h.opts.Backup == nil {
		h.fail(w, r, fmt.Errorf("admin: backup: %w", ErrCannotBackup))
		return
	}
	dir, err := os.MkdirTemp("", "execfsm-backup-")
	if err != nil {
		h.fail(w, r, fmt.Errorf("admin: backup: %w", err))
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "backup")
	revision, err := h.opts.Backup(r.Context(), path)
	if err != nil {
		h.fail(w, r, fmt.Errorf("admin: backup: %w", err))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		h.fail(w, r, fmt.Errorf("admin: backup: %w", err))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		h.fail(w, r, fmt.Errorf("admin: backup: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.Header().Set("Content-Disposition", `attachment; filename="backup"`)
	w.Header().Set(revisionHeader, strconv.FormatUint(revision, 10))
	if _, err := io.Copy(w, f); err != nil {
		h.opts.Logger.Warn("admin: a backup's client went away", "error", err)
	}
}

// revisionHeader carries the revision a backup is the store at.
const revisionHeader = "Execfsm-Revision"

func (h *Handler) apiDelete(w http.ResponseWriter, r *http.Request) {
	body, err := decodeWriteBody(w, r, "delete")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req := DeleteRequest{ID: r.PathValue("id"), Reason: body.Reason, Actor: body.Actor, Force: body.Force, Archive: h.opts.Archive}
	if err := req.check(); err != nil {
		h.fail(w, r, err)
		return
	}
	actor, err := h.authorize(r, Operation{Verb: VerbDelete, ID: req.ID, Reason: req.Reason, Actor: req.Actor})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req.Actor = actor
	ctx, cancel := h.context(r)
	defer cancel()
	deleted, err := h.ops.Delete(ctx, req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deleted)
}

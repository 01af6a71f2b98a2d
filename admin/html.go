package admin

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

//go:embed page.html
var pageFS embed.FS

// liveJS is the execution page's script, served from the handler itself:
// the pages load nothing from elsewhere.
//
//go:embed live.js
var liveJS []byte

var pages = template.Must(template.New("").ParseFS(pageFS, "page.html"))

// pageBase is what every page shows around its content.
type pageBase struct {
	Title string
	Path  string
	Nav   string
	Table *schema.Document
	// Serves is the version of the table the serving controller decides
	// with ("version 1"), when it said (HandlerOptions.Serves).
	Serves string
	Writes bool
	Flash  string
	Error  string
}

// render writes a page; a template that fails is a bug, told as a plain
// 500, never half a page.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.opts.Logger.Error("admin: a page failed to render", "page", name, "err", err)
		http.Error(w, "admin: internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// contentSecurityPolicy: the only script is the handler's own (live.js,
// which reads this handler's API and pages and nothing else), nothing
// loads from elsewhere, no other site may frame the pages (clickjacking
// a stop) and forms post only here.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; " +
	"img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// pageScript serves live.js.
func (h *Handler) pageScript(w http.ResponseWriter, _ *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-cache")
	_, _ = w.Write(liveJS)
}

// base reads the table for a page's header; a store without one still
// has pages (nothing can be stopped from them).
func (h *Handler) base(r *http.Request, title, nav string) (pageBase, error) {
	ctx, cancel := h.context(r)
	defer cancel()
	table, err := h.ops.table(ctx)
	return h.baseOf(title, nav, table), err
}

// baseOf is a page's header with the table already read.
func (h *Handler) baseOf(title, nav string, table *schema.Document) pageBase {
	b := pageBase{Title: title, Path: h.opts.Path, Nav: nav, Writes: h.opts.Authorize != nil, Table: table}
	if h.ops.serves != nil {
		b.Serves = h.ops.serves.version(table)
	}
	return b
}

// notServed says why the serving controller would not act on rec, if it
// said which table it serves and would not.
func (h *Handler) notServed(table *schema.Document, rec storage.Record) string {
	if h.ops.serves == nil {
		return ""
	}
	return h.ops.serves.refuses(rec, table)
}

func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, status int, err error) {
	b := h.baseOf(http.StatusText(status), "", nil)
	b.Error = err.Error()
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		// A browser asks for credentials only when told how.
		w.Header().Set("WWW-Authenticate", `Basic realm="execfsm", charset="UTF-8"`)
	}
	h.render(w, status, "error", struct {
		pageBase
		Status string
	}{b, fmt.Sprintf("%d %s", status, http.StatusText(status))})
}

type statusCount struct {
	Name, Class, Link string
	N                 int
	Counted           bool // a live status, counted; an ended one is not
	Selected          bool
}

type listRow struct {
	ID, Link, Status, Class, Since, Owner, Reason string
	Revision                                      uint64
	Foreign                                       bool
	NotServed                                     string // why the serving controller would not act on it
}

type unreadableRow struct {
	ID       string
	Revision uint64
	Error    string
}

func (h *Handler) pageList(w http.ResponseWriter, r *http.Request) {
	if h.foundByID(w, r) {
		return
	}
	p, opts, table, ok := h.list(w, r)
	if !ok {
		return
	}
	b := h.baseOf("Executions", "list", table)
	data := struct {
		pageBase
		Status     string
		Live       int // the live records, counted
		Counts     []statusCount
		Rows       []listRow
		Unreadable []unreadableRow
		Next       string
		Search     string
	}{pageBase: b, Status: strings.Join(opts.Statuses, ","), Search: opts.IDContains}
	selected := map[string]bool{}
	for _, s := range opts.Statuses {
		selected[s] = true
	}
	var order []string
	if b.Table != nil {
		order = b.Table.Table.States
	}
	for _, s := range slices.Sorted(maps.Keys(p.Counts)) {
		if !slices.Contains(order, s) && (b.Table == nil || knows(b.Table, s)) {
			order = append(order, s) // of an earlier version, or no table
		}
	}
	for _, s := range order {
		n, counted := p.Counts[s]
		data.Counts = append(data.Counts, statusCount{Name: s, N: n, Counted: counted, Class: h.class(b.Table, s), Selected: selected[s], Link: h.listLink(s, "", "")})
		data.Live += n
	}
	for _, list := range []struct {
		recs    []storage.Record
		foreign bool
	}{{p.Items, false}, {p.Foreign, true}} {
		for _, rec := range list.recs {
			row := listRow{ID: rec.ID, Link: h.executionLink(rec.ID), Status: rec.Status, Class: h.class(b.Table, rec.Status),
				Since: when(rec.Since), Owner: ownerOf(rec), Revision: rec.Revision, Reason: rec.Reason, Foreign: list.foreign}
			if !list.foreign {
				row.NotServed = h.notServed(b.Table, rec)
			}
			data.Rows = append(data.Rows, row)
		}
	}
	for _, u := range p.Unreadable {
		data.Unreadable = append(data.Unreadable, unreadableRow{ID: u.ID, Revision: u.Revision, Error: u.Err.Error()})
	}
	if p.Next != "" {
		data.Next = h.listLink(data.Status, p.Next, data.Search)
	}
	h.render(w, http.StatusOK, "list", data)
}

// foundByID answers a search (q) that names an execution by its whole id
// with that execution's page, and reports whether it did; any other
// search lists the ids that contain it.
func (h *Handler) foundByID(w http.ResponseWriter, r *http.Request) bool {
	id := strings.TrimSpace(r.URL.Query().Get("q"))
	if id == "" || storage.ValidateID(id) != nil {
		return false
	}
	if _, err := h.authorize(r, Operation{Verb: VerbGet, ID: id}); err != nil {
		return false // the listing asks the Authorizer in its turn
	}
	ctx, cancel := h.context(r)
	defer cancel()
	if _, err := h.ops.Get(ctx, id); err != nil {
		return false
	}
	http.Redirect(w, r, h.executionLink(id), http.StatusSeeOther)
	return true
}

// class is a status's CSS class: its role in the recorded table.
func (h *Handler) class(table *schema.Document, status string) string {
	if table == nil {
		return "ended"
	}
	return roleClass(*table, status)
}

func (h *Handler) listLink(status, cursor, search string) string {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if search != "" {
		q.Set("q", search)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if len(q) == 0 {
		return h.opts.Path
	}
	return h.opts.Path + "?" + q.Encode()
}

func (h *Handler) executionLink(id string) string {
	return h.opts.Path + "executions/" + url.PathEscape(id)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func ownerOf(rec storage.Record) string {
	if rec.Owner == "" {
		return "-"
	}
	return fmt.Sprintf("%s@%d", rec.Owner, rec.Epoch)
}

type metaRow struct{ Key, Value string }

func (h *Handler) pageExecution(w http.ResponseWriter, r *http.Request) {
	h.execution(w, r, http.StatusOK, nil)
}

// execution renders one execution's page, with the error of a stop that
// failed, or saying that the stop the query names (stopped=revision,
// where a stop redirects to) is in the audit trail.
func (h *Handler) execution(w http.ResponseWriter, r *http.Request, status int, stopErr error) {
	id := r.PathValue("id")
	if _, err := h.authorize(r, Operation{Verb: VerbGet, ID: id}); err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.base(r, id, "list")
	if err != nil {
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
	b.Flash = stoppedFlash(rec, r.URL.Query())
	if stopErr != nil {
		b.Error = stopErr.Error()
	}
	data := struct {
		pageBase
		ID, Status, Class, Previous, Since, Reason, Owner, Updated string
		Revision                                                   uint64
		Foreign                                                    bool
		Holder                                                     holder
		Meta                                                       []metaRow
		Timeline                                                   []step
		Watch                                                      string // the API's watch of this execution, for the page's script
		Cut                                                        bool
		Kept                                                       int
		StopAction                                                 string
		Stop                                                       stopBox
	}{pageBase: b, ID: rec.ID, Status: rec.Status, Class: h.class(b.Table, rec.Status), Previous: rec.Previous,
		Since: when(rec.Since), Reason: orDash(rec.Reason), Owner: ownerOf(rec), Updated: when(rec.UpdatedAt), Revision: rec.Revision,
		Foreign: b.Table != nil && !knows(b.Table, rec.Status), StopAction: h.executionLink(rec.ID) + "/stop",
		Cut: rec.History.Len() > 0 && rec.History.Len() >= rec.HistoryKept(), Kept: rec.HistoryKept()}
	for _, k := range slices.Sorted(maps.Keys(rec.Meta)) {
		data.Meta = append(data.Meta, metaRow{Key: k, Value: metaValue(rec, k)})
	}
	data.Timeline = timeline(rec, b.Table, h.class, time.Now())
	if h.ops.watcher != nil {
		data.Watch = h.opts.Path + "api/v1/watch?" + url.Values{"id": {rec.ID}}.Encode()
	}
	data.Holder = h.holderOf(ctx, rec, b.Table)
	data.Stop = h.stopBox(b.Table, rec, data.Holder)
	h.render(w, status, "execution", data)
}

// holder is what the page says of an execution's owner: whether a live
// controller holds it.
type holder struct {
	Class, Text string
}

func (h *Handler) holderOf(ctx context.Context, rec storage.Record, table *schema.Document) holder {
	claim, held, err := h.ops.store.Held(ctx, rec.ID)
	switch {
	case err != nil:
		return holder{"unknown", "whether a controller holds it could not be read: " + err.Error()}
	case held:
		return holder{"alive", fmt.Sprintf("%s@%d holds it: its controller is alive", claim.Owner, claim.Epoch)}
	case table != nil && slices.Contains(table.Table.Terminal, rec.Status):
		return holder{"none", "nobody holds it: it has ended"}
	case rec.Owner != "":
		return holder{"gone", "nobody holds it: its owner's ownership has ended"}
	}
	return holder{"none", "no controller has taken it over"}
}

// stopBox is the page's stop form: whether it is offered, what it writes,
// and what the operator should know first.
type stopBox struct {
	Can  bool
	To   string
	Note string // why it is not offered
	// NotServed says why the serving controller would not act on a
	// stop: the form offers to force it.
	NotServed string
	// Unheld says that nobody carries a stop out until a controller
	// takes the execution over.
	Unheld string
}

// stopBox says whether the page offers a stop, and why not.
func (h *Handler) stopBox(table *schema.Document, rec storage.Record, who holder) stopBox {
	if h.opts.Authorize == nil {
		return stopBox{Note: "This controller accepts no writes: it configured no authorizer."}
	}
	if table == nil {
		return stopBox{Note: "The store records no table, so nothing here knows which status stops an execution."}
	}
	t, roles, err := table.Rebuild()
	if err != nil {
		return stopBox{Note: err.Error()}
	}
	stopping, _, ok := roles.Stopping()
	if !ok {
		return stopBox{Note: fmt.Sprintf("Table %s has no stopping status: its executions are not stopped by request.", table.Name)}
	}
	box := stopBox{To: stopping}
	switch {
	case rec.Status == stopping:
		box.Note = "A stop was asked for already: the execution is " + stopping + "."
	case !t.Has(rec.Status):
		box.Note = "Its status is not one of the table's: it is left alone."
	case !t.Allowed(rec.Status, stopping):
		box.Note = fmt.Sprintf("Table %s does not move %s to %s.", table.Name, rec.Status, stopping)
	default:
		box.Can = true
		box.NotServed = h.notServed(table, rec)
		if who.Class == "gone" || who.Class == "none" {
			box.Unheld = "No controller holds it now: the stop is carried out by the controller that takes it over, or by a Reaper once the stop outlasts its deadline."
		}
	}
	return box
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// metaValue shows the library's own machine values readably (the
// restart times as times).
func metaValue(rec storage.Record, k string) string {
	if text, ok := recovery.CountText(k, rec.Meta[k], when); ok {
		return text
	}
	return rec.Meta[k]
}

// maxFormBody bounds a posted form: a reason at its longest, encoded.
const maxFormBody = 64 << 10

// pageStop is the stop form's post: a body that is not the form (another
// type, a field twice or one the form does not have) writes nothing.
func (h *Handler) pageStop(w http.ResponseWriter, r *http.Request) {
	req, err := stopForm(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	stopped, err := h.stop(r, req)
	switch {
	case errors.Is(err, ErrForbidden), errors.Is(err, ErrUnauthenticated), errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrInvalidRecord):
		h.fail(w, r, err)
		return
	case err != nil:
		// The move was refused or failed: the page says why, beside
		// the execution as it is now.
		status, _ := statusOf(err)
		h.execution(w, r, status, err)
		return
	}
	// Post/redirect/get: a reload does not post again. The page finds
	// the stop in the trail: a link cannot make it say what did not
	// happen.
	q := url.Values{"stopped": {strconv.FormatUint(stopped.Revision, 10)}}
	if !stopped.Changed {
		q.Set("already", "1")
	}
	http.Redirect(w, r, h.executionLink(stopped.ID)+"?"+q.Encode(), http.StatusSeeOther)
}

// stopForm reads the stop form's post.
func stopForm(w http.ResponseWriter, r *http.Request) (StopRequest, error) {
	if err := requireType(r, "application/x-www-form-urlencoded"); err != nil {
		return StopRequest{}, fmt.Errorf("admin: stop: %w", err)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		return StopRequest{}, fmt.Errorf("admin: stop: %w: %v", ErrInvalidRequest, err)
	}
	req := StopRequest{ID: r.PathValue("id"), Actor: "web"}
	for k, v := range r.PostForm {
		switch {
		case len(v) != 1:
			return StopRequest{}, fmt.Errorf("admin: stop: %w: the form's %s is given %d times", ErrInvalidRequest, quoted(k), len(v))
		case k == "reason":
			req.Reason = v[0]
		case k == "force":
			req.Force = v[0] == "1"
		default:
			return StopRequest{}, fmt.Errorf("admin: stop: %w: the form has no field %s", ErrInvalidRequest, quoted(k))
		}
	}
	return req, nil
}

// stoppedFlash says what the stop the query names did, if the trail
// shows it: stopped=N, the revision the stop wrote (a trail entry holds
// the revision it replaced, so the write at N is the entry the next one
// follows, or the last one while the record is at N); already=1, a stop
// that found the execution in the stopping status at revision N. The
// record may have moved on since (the controller ending the execution):
// the stop is still found.
func stoppedFlash(rec storage.Record, query url.Values) string {
	rev, err := strconv.ParseUint(query.Get("stopped"), 10, 64)
	if err != nil {
		return ""
	}
	entries := rec.History.Entries()
	for i, e := range entries {
		written := rec.Revision
		if i+1 < len(entries) {
			written = entries[i+1].Revision
		}
		if written != rev {
			continue
		}
		if query.Get("already") != "" {
			return fmt.Sprintf("%s was %s already: nothing written.", rec.ID, e.To)
		}
		if e.From == e.To {
			return ""
		}
		return fmt.Sprintf("Stop asked: %s → %s at revision %d, by %s.", e.From, e.To, rev, e.Actor)
	}
	return ""
}

func (h *Handler) pageDiagram(w http.ResponseWriter, r *http.Request) {
	if _, err := h.authorize(r, Operation{Verb: VerbTable}); err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.base(r, "Diagram", "diagram")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if b.Table == nil {
		h.fail(w, r, fmt.Errorf("admin: diagram: %w: the controllers record their table when they start (schema.Save)", schema.ErrNoTable))
		return
	}
	ctx, cancel := h.context(r)
	defer cancel()
	p, err := h.ops.listIn(ctx, b.Table, ListOptions{Limit: 1}) // for its counts
	if err != nil {
		h.fail(w, r, err)
		return
	}
	table, _, err := b.Table.Rebuild()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var legend []statusCount
	for _, c := range []string{"notstarted", "running", "relocating", "stopping", "parked", "finishing", "completed", "failed", "ended"} {
		if used(*b.Table, c) {
			legend = append(legend, statusCount{Class: c, Name: legendName[c]})
		}
	}
	svg, err := h.diagrams.svg(ctx, *b.Table, p.Counts)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "diagram", struct {
		pageBase
		SVG     template.HTML
		Mermaid string
		Legend  []statusCount
	}{b, template.HTML(svg), table.Mermaid(), legend}) // Graphviz escapes the labels and tooltips it writes; diagramDOT quotes them for it
}

var legendName = map[string]string{
	"notstarted": "not started", "running": "running", "relocating": "relocating", "stopping": "stopping",
	"parked": "parked", "finishing": "finishing", "completed": "completed", "failed": "failed", "ended": "other end",
}

// used reports whether a state of d's table has the class.
func used(d schema.Document, class string) bool {
	return slices.ContainsFunc(d.Table.States, func(s string) bool { return roleClass(d, s) == class })
}

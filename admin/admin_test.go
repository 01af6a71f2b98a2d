package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/archive"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Servers, watches and clients start goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// bound is how long a test waits for anything.
const bound = 20 * time.Second

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

// ticking is a clock a second further at each reading, from a fixed
// time: the records' times are golden.
func ticking() func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

// populate writes one execution per interesting status, one relocated by
// its owner, and the table.
func populate(t *testing.T, store storage.Store) {
	t.Helper()
	ctx := timeout(t)
	clock := ticking()
	opts := transition.PersistedOptions{Actor: "cluster-master", Clock: clock}
	move := func(id string, path ...state.Status) {
		exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, opts)
		require.NoError(t, err)
		_, err = exec.Create(ctx, transition.To(state.Pending).Because("submitted"))
		require.NoError(t, err)
		for _, s := range path {
			_, err = exec.Fire(ctx, s, "")
			require.NoError(t, err)
		}
	}
	move("ex-pending")
	move("ex-done", state.Scheduling, state.Initializing, state.Running, state.Completed)
	move("ex-moving", state.Scheduling, state.Initializing, state.Running)
	controller, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-moving", transition.PersistedOptions{Actor: "pod-a", Clock: clock})
	require.NoError(t, err)
	_, _, err = controller.Acquire(ctx, storage.Lease{Holder: "pod-a", TTL: time.Minute, Reason: "controller started"}, nil)
	require.NoError(t, err)
	_, err = controller.Fire(ctx, state.Relocating, "SIGTERM: node drained")
	require.NoError(t, err)
	require.NoError(t, controller.Ownership().Release(ctx))
	move("ex-running", state.Scheduling, state.Initializing, state.Running)
	_, err = schema.Save(ctx, store, "teraslice", teraslice.Roles())
	require.NoError(t, err)
}

// served is a handler on a real HTTP server on 127.0.0.1.
type served struct {
	store   *storage.Memory
	handler *admin.Handler
	server  *httptest.Server
	client  *admin.Client
}

func serve(t *testing.T, opts admin.HandlerOptions) *served {
	t.Helper()
	store := storage.NewMemory()
	populate(t, store)
	return serveStore(t, store, opts)
}

func serveStore(t *testing.T, store *storage.Memory, opts admin.HandlerOptions) *served {
	t.Helper()
	h, err := admin.NewHandler(store, opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	path := opts.Path
	if path == "" {
		path = "/"
	}
	mux.Handle(path, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	c, err := admin.NewClient(srv.URL+path, admin.ClientOptions{HTTPClient: srv.Client()})
	require.NoError(t, err)
	return &served{store: store, handler: h, server: srv, client: c}
}

// allowAll lets everything, writing as the actor the client names.
func allowAll(_ *http.Request, a admin.Operation) (string, error) { return a.Actor, nil }

func TestEveryOperationAnswersTheSameOverHTTPAsOnTheStore(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{Authorize: allowAll})
	local, err := admin.NewStoreOperator(s.store)
	require.NoError(t, err)
	for name, op := range map[string]admin.Operator{"store": local, "http": s.client} {
		t.Run(name, func(t *testing.T) {
			d, err := op.Table(ctx)
			require.NoError(t, err)
			want, err := schema.Load(ctx, s.store)
			require.NoError(t, err)
			require.Equal(t, want, d)

			rec, err := op.Get(ctx, "ex-moving")
			require.NoError(t, err)
			stored, err := s.store.Get(ctx, "ex-moving")
			require.NoError(t, err)
			require.Equal(t, stored, rec)

			_, err = op.Get(ctx, "ex-nobody")
			require.ErrorIs(t, err, storage.ErrNotFound)
			_, err = op.Get(ctx, "")
			require.ErrorIs(t, err, storage.ErrInvalidRecord)

			p, err := op.List(ctx, admin.ListOptions{Statuses: []string{"relocating", "pending"}})
			require.NoError(t, err)
			require.Equal(t, []string{"ex-moving", "ex-pending"}, ids(p.Items))
			require.Equal(t, liveCounts(map[string]int{"pending": 1, "relocating": 1, "running": 1}), p.Counts,
				"the live statuses counted, the ended ones (completed) not")
			require.Empty(t, p.Next)
			_, err = op.List(ctx, admin.ListOptions{Statuses: []string{"runing"}})
			require.ErrorIs(t, err, admin.ErrInvalidRequest)
			require.ErrorContains(t, err, `"runing" is not a status of table teraslice`)
		})
	}
	// A stop through either is the same write, and a second one writes
	// nothing.
	for name, op := range map[string]admin.Operator{"store": local, "http": s.client} {
		id := map[string]string{"store": "ex-running", "http": "ex-pending"}[name]
		got, err := op.Stop(ctx, admin.StopRequest{ID: id, Reason: "user asked", Actor: "operator:" + name})
		require.NoError(t, err, name)
		rec, err := s.store.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, admin.Stopped{ID: id, From: got.From, To: "stopping", Changed: true, Revision: rec.Revision, Actor: "operator:" + name, Reason: "user asked", At: got.At,
			Warnings: []string{"no controller holds " + id + " now (it has no owner): the stop is carried out by the controller that takes it over, or a Reaper ends it once it has been stopping for 5m0s (the table's deadline)"}}, got)
		require.Equal(t, "stopping", rec.Status)
		again, err := op.Stop(ctx, admin.StopRequest{ID: id, Reason: "again", Actor: "operator:" + name})
		require.NoError(t, err)
		require.False(t, again.Changed)
		_, err = op.Stop(ctx, admin.StopRequest{ID: "ex-done", Reason: "too late", Actor: "operator"})
		require.ErrorIs(t, err, transition.ErrNotAllowed, name)
		_, err = op.Stop(ctx, admin.StopRequest{ID: "ex-done", Reason: " ", Actor: "operator"})
		require.ErrorIs(t, err, admin.ErrInvalidRequest, name)
	}
}

// liveCounts is the Counts of a page of Teraslice's table: every live
// status, those not given zero.
func liveCounts(given map[string]int) map[string]int {
	out := map[string]int{}
	for _, s := range teraslice.Lifecycle().LiveStatuses() {
		out[s] = given[s]
	}
	return out
}

func ids(recs []storage.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

func TestAListIsPagedInIDOrder(t *testing.T) {
	ctx := timeout(t)
	store := storage.NewMemory()
	for i := range 25 {
		exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, fmt.Sprintf("ex-%02d", i), transition.PersistedOptions{Actor: "master"})
		require.NoError(t, err)
		_, err = exec.Create(ctx, transition.To(state.Pending))
		require.NoError(t, err)
	}
	_, err := schema.Save(ctx, store, "teraslice", teraslice.Roles())
	require.NoError(t, err)
	s := serveStore(t, store, admin.HandlerOptions{MaxPage: 10})
	var seen []string
	cursor, pages := "", 0
	for {
		p, err := s.client.List(ctx, admin.ListOptions{Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Items), 10)
		require.Equal(t, liveCounts(map[string]int{"pending": 25}), p.Counts, "every page counts the whole store's live statuses")
		seen = append(seen, ids(p.Items)...)
		pages++
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	require.Equal(t, 3, pages)
	require.Len(t, seen, 25)
	require.IsIncreasing(t, seen)
	p, err := s.client.List(ctx, admin.ListOptions{Limit: 4, Cursor: "ex-20"}) // a Memory store's cursor is the last id
	require.NoError(t, err)
	require.Equal(t, []string{"ex-21", "ex-22", "ex-23", "ex-24"}, ids(p.Items))
	require.Empty(t, p.Next, "the last page says so")
	_, err = s.client.List(ctx, admin.ListOptions{Limit: 11})
	require.ErrorIs(t, err, admin.ErrInvalidRequest, "no page over MaxPage")
	var apiErr *admin.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
}

// raw makes a request and returns the status and body.
func raw(t *testing.T, method, u string, body io.Reader, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(timeout(t), method, u, body)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

func TestWritesAreRefusedWithoutAnAuthorizer(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{})
	before, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	_, err = s.client.Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "user asked", Actor: "operator"})
	require.ErrorIs(t, err, admin.ErrForbidden)
	require.ErrorContains(t, err, "it configured no authorizer")
	var apiErr *admin.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.StatusCode)
	// The form too, from the page itself.
	status, _ := raw(t, http.MethodPost, s.server.URL+"/executions/ex-running/stop", strings.NewReader("reason=user+asked"),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}})
	require.Equal(t, http.StatusForbidden, status)
	after, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing written")
	// Reads are open.
	_, err = s.client.Get(ctx, "ex-running")
	require.NoError(t, err)
}

func TestTheAuthorizerDecidesEveryRequestAndNamesTheWriter(t *testing.T) {
	ctx := timeout(t)
	var mu sync.Mutex
	var asked []admin.Operation
	authorize := func(r *http.Request, a admin.Operation) (string, error) {
		mu.Lock()
		asked = append(asked, a)
		mu.Unlock()
		user, pass, ok := r.BasicAuth()
		switch {
		case !ok:
			return "", fmt.Errorf("%w: no credentials", admin.ErrUnauthenticated)
		case user == "alice" && pass == "s3cret":
			return "operator:alice", nil
		case user == "bob" && pass == "hunter2" && !a.Verb.Writes():
			return "", nil
		}
		return "", errors.New("bob may only read")
	}
	s := serve(t, admin.HandlerOptions{Authorize: authorize})
	as := func(user, pass string) *admin.Client {
		c, err := admin.NewClient(s.server.URL, admin.ClientOptions{Username: user, Password: pass})
		require.NoError(t, err)
		return c
	}
	_, err := s.client.Get(ctx, "ex-running")
	require.ErrorIs(t, err, admin.ErrUnauthenticated)
	var apiErr *admin.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)

	_, err = as("bob", "hunter2").Get(ctx, "ex-running")
	require.NoError(t, err)
	_, err = as("bob", "hunter2").Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "bob wants it", Actor: "alice"})
	require.ErrorIs(t, err, admin.ErrForbidden)
	require.ErrorContains(t, err, "bob may only read")
	rec, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	require.Equal(t, "running", rec.Status, "a refused write writes nothing")

	// The trail names who the authorizer says, not who the client says.
	got, err := as("alice", "s3cret").Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "user asked", Actor: "someone-else"})
	require.NoError(t, err)
	require.Equal(t, "operator:alice", got.Actor)
	rec, err = s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	last := rec.History.Entries()[rec.History.Len()-1]
	require.Equal(t, "operator:alice", last.Actor)
	require.Equal(t, "user asked", last.Reason)
	require.Empty(t, last.Owner, "an outside authority: no ownership taken")

	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, asked, admin.Operation{Verb: admin.VerbStop, ID: "ex-running", Reason: "user asked", Actor: "someone-else"})
	require.Contains(t, asked, admin.Operation{Verb: admin.VerbGet, ID: "ex-running"})
}

func TestAnAuthorizerNamingNobodyWritesNothing(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{Authorize: func(*http.Request, admin.Operation) (string, error) { return " ", nil }})
	_, err := s.client.Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "user asked", Actor: "operator"})
	require.ErrorIs(t, err, admin.ErrForbidden)
	rec, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	require.Equal(t, "running", rec.Status)
}

func TestACrossSiteFormPostIsRefused(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{Authorize: func(*http.Request, admin.Operation) (string, error) { return "web", nil }})
	form := func() io.Reader { return strings.NewReader(url.Values{"reason": {"clicked"}}.Encode()) }
	for name, header := range map[string]http.Header{
		"Sec-Fetch-Site":      {"Sec-Fetch-Site": {"cross-site"}},
		"Origin of elsewhere": {"Origin": {"https://evil.example"}},
	} {
		header.Set("Content-Type", "application/x-www-form-urlencoded")
		status, body := raw(t, http.MethodPost, s.server.URL+"/executions/ex-running/stop", form(), header)
		require.Equal(t, http.StatusForbidden, status, name)
		require.Contains(t, body, "cross-origin request may not write", name)
		// The API's POST as well.
		status, _ = raw(t, http.MethodPost, s.server.URL+"/api/v1/executions/ex-running/stop", strings.NewReader(`{"reason":"x"}`), header)
		require.Equal(t, http.StatusForbidden, status, name)
	}
	rec, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	require.Equal(t, "running", rec.Status, "nothing written")

	// From the page itself, the stop lands and the page says so.
	status, body := raw(t, http.MethodPost, s.server.URL+"/executions/ex-running/stop", form(),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {s.server.URL}})
	require.Equal(t, http.StatusSeeOther, status, body)
	rec, err = s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	require.Equal(t, "stopping", rec.Status)
	status, body = raw(t, http.MethodGet, fmt.Sprintf("%s/executions/ex-running?stopped=%d", s.server.URL, rec.Revision), nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Stop asked: running → stopping at revision")
	// A link cannot make the page claim a stop the trail lacks.
	_, body = raw(t, http.MethodGet, s.server.URL+"/executions/ex-pending?stopped=3", nil, nil)
	require.NotContains(t, body, "Stop asked")
}

func TestEveryRequestIsBoundByTheHandlersTimeout(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{Timeout: time.Nanosecond})
	_, err := s.client.Get(ctx, "ex-running")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var apiErr *admin.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusGatewayTimeout, apiErr.StatusCode)
	_, err = s.client.List(ctx, admin.ListOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestAPanicInARequestLeavesTheControllerServing(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{Authorize: func(_ *http.Request, a admin.Operation) (string, error) {
		if a.ID == "ex-done" {
			panic("an authorizer's bug")
		}
		return "", nil
	}})
	_, err := s.client.Get(ctx, "ex-done")
	var apiErr *admin.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusInternalServerError, apiErr.StatusCode)
	_, err = s.client.Get(ctx, "ex-running")
	require.NoError(t, err, "the next request is served")
}

func TestAStoreWithoutATableIsReadAndNeverWritten(t *testing.T) {
	ctx := timeout(t)
	store := storage.NewMemory()
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = exec.Create(ctx, transition.To(state.Pending))
	require.NoError(t, err)
	s := serveStore(t, store, admin.HandlerOptions{Authorize: allowAll})
	_, err = s.client.Table(ctx)
	require.ErrorIs(t, err, schema.ErrNoTable)
	p, err := s.client.List(ctx, admin.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"ex-1"}, ids(p.Items))
	_, err = s.client.Stop(ctx, admin.StopRequest{ID: "ex-1", Reason: "user asked", Actor: "operator"})
	require.ErrorIs(t, err, schema.ErrNoTable)
	rec, err := store.Get(ctx, "ex-1")
	require.NoError(t, err)
	require.Equal(t, "pending", rec.Status)
	status, body := raw(t, http.MethodGet, s.server.URL+"/", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "no table recorded")
	status, _ = raw(t, http.MethodGet, s.server.URL+"/diagram", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
}

// watchEvents collects a watch's events in the background.
type watchEvents struct {
	mu     sync.Mutex
	events []admin.Event
	err    error
	done   chan struct{}
}

func watchInBackground(ctx context.Context, op admin.Operator, ids ...string) *watchEvents {
	w := &watchEvents{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ev, err := range op.Watch(ctx, ids...) {
			w.mu.Lock()
			if err != nil {
				w.err = err
			} else {
				w.events = append(w.events, ev)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// ended waits until the watch has ended.
func (w *watchEvents) ended(t *testing.T, why string) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(bound):
		t.Fatalf("the watch did not end within %v: %s", bound, why)
	}
}

// waitFor waits until the watch has seen what ok says.
func (w *watchEvents) waitFor(t *testing.T, what string, ok func([]admin.Event, error) bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		done := ok(w.events, w.err)
		w.mu.Unlock()
		if done {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Fatalf("watch: no %s within %v; saw %d events, err %v", what, bound, len(w.events), w.err)
}

func TestAWatchStreamsTheRecordsThenTheirChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(timeout(t))
	s := serve(t, admin.HandlerOptions{Authorize: allowAll})
	local, err := admin.NewStoreOperator(s.store)
	require.NoError(t, err)
	remote := watchInBackground(ctx, s.client)
	mine := watchInBackground(ctx, local, "ex-running")
	remote.waitFor(t, "current records", func(evs []admin.Event, _ error) bool { return len(evs) == 4 })
	mine.waitFor(t, "the current record", func(evs []admin.Event, _ error) bool { return len(evs) == 1 })
	_, err = s.client.Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "user asked", Actor: "operator"})
	require.NoError(t, err)
	changed := func(evs []admin.Event, _ error) bool {
		last := evs[len(evs)-1]
		return last.Type == admin.EventChanged && last.ID == "ex-running" && last.Record.Status == "stopping"
	}
	remote.waitFor(t, "the stop", changed)
	mine.waitFor(t, "the stop", changed)
	for _, ev := range remote.events[:4] {
		require.Equal(t, admin.EventCurrent, ev.Type)
		require.Equal(t, ev.ID, ev.Record.ID)
	}
	cancel()
	for _, w := range []*watchEvents{remote, mine} {
		w.ended(t, "its context is done")
		require.NoError(t, w.err, "a watch ended by its caller ends without an error")
	}
}

func TestWatchesAreBoundedAndEndWhenTheHandlerCloses(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{MaxWatches: 1})
	first := watchInBackground(ctx, s.client)
	first.waitFor(t, "current records", func(evs []admin.Event, _ error) bool { return len(evs) == 4 })
	second := watchInBackground(ctx, s.client)
	second.ended(t, "one watch over MaxWatches is refused")
	require.ErrorIs(t, second.err, admin.ErrUnavailable)
	require.ErrorContains(t, second.err, "streams 1 watches already")

	s.handler.Close()
	first.ended(t, "Close ends the watches")
	require.ErrorIs(t, first.err, admin.ErrUnavailable)
	require.ErrorContains(t, first.err, "the handler is closed")
	_, err := s.client.Get(ctx, "ex-running")
	require.NoError(t, err, "a closed handler still answers what is not a watch")
}

func TestAWatchWhoseClientDoesNotReadIsDropped(t *testing.T) {
	ctx := timeout(t)
	s := serve(t, admin.HandlerOptions{MaxWatches: 1, WriteTimeout: 300 * time.Millisecond})
	// A client that asks for a watch and never reads: its socket's
	// buffers fill, the handler's write waits, and WriteTimeout ends it.
	conn, err := net.Dial("tcp", s.server.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	_, err = fmt.Fprintf(conn, "GET /api/v1/watch HTTP/1.1\r\nHost: %s\r\n\r\n", s.server.Listener.Addr())
	require.NoError(t, err)
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, "200 OK")
	// Big records written while it watches: far more than any socket
	// buffers hold. Each round writes, then asks for a watch: the slot
	// is free again once the stuck watch is dropped.
	big := strings.Repeat("x", storage.MaxReasonLen-100)
	deadline := time.Now().Add(bound)
	for round := 0; ; round++ {
		require.True(t, time.Now().Before(deadline), "the stuck watch was never dropped")
		for i := range 50 {
			rec, err := s.store.Get(ctx, "ex-pending")
			require.NoError(t, err)
			rec.Reason = fmt.Sprint(round, i, big)[:len(big)]
			_, err = s.store.CompareAndSwap(ctx, rec.ID, rec.Revision, rec)
			require.NoError(t, err)
		}
		w := watchInBackground(ctx, s.client)
		w.waitFor(t, "an answer", func(evs []admin.Event, err error) bool { return len(evs) > 0 || err != nil })
		w.mu.Lock()
		err := w.err
		w.mu.Unlock()
		if err == nil {
			break // served: the stuck one is gone
		}
		require.ErrorIs(t, err, admin.ErrUnavailable)
		w.ended(t, "a refused watch ends")
	}
	s.handler.Close()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// stamped matches every time in JSON; those the test's clock did not
// give (2026-12-03T12:00:xx, whole seconds) are the day's.
var stamped = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"`)

// TestTheJSONShapesAreStable pins what the API sends, as its
// documentation shows it: a change here is a change for every tool that
// reads it.
func TestTheJSONShapesAreStable(t *testing.T) {
	s := serve(t, admin.HandlerOptions{Authorize: func(*http.Request, admin.Operation) (string, error) { return "operator:alice", nil }})
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"get.json", http.MethodGet, "/api/v1/executions/ex-moving", "", http.StatusOK},
		{"list.json", http.MethodGet, "/api/v1/executions?status=relocating,completed&limit=1", "", http.StatusOK},
		{"not-found.json", http.MethodGet, "/api/v1/executions/ex-nobody", "", http.StatusNotFound},
		{"stop.json", http.MethodPost, "/api/v1/executions/ex-running/stop", `{"reason":"user asked","actor":"alice"}`, http.StatusOK},
		{"stop-refused.json", http.MethodPost, "/api/v1/executions/ex-done/stop", `{"reason":"too late"}`, http.StatusConflict},
		{"stop-bad-body.json", http.MethodPost, "/api/v1/executions/ex-done/stop", `{"why":"x"}`, http.StatusBadRequest},
		{"no-route.json", http.MethodGet, "/api/v1/nothing", "", http.StatusNotFound},
		{"method-not-allowed.json", http.MethodDelete, "/api/v1/executions/ex-done", "", http.StatusMethodNotAllowed},
	} {
		var body io.Reader
		header := http.Header{}
		if tc.body != "" {
			body = strings.NewReader(tc.body)
			header.Set("Content-Type", "application/json")
		}
		status, got := raw(t, tc.method, s.server.URL+tc.path, body, header)
		require.Equal(t, tc.status, status, tc.name)
		require.True(t, json.Valid([]byte(got)), tc.name)
		// The stop's time is the clock's, not the test's.
		got = stamped.ReplaceAllStringFunc(got, func(m string) string {
			if strings.HasPrefix(m, `"2026-12-03T12:00:`) && !strings.Contains(m, ".") {
				return m
			}
			return `"<now>"`
		})
		golden(t, tc.name, got)
	}
}

// The pages, as a browser gets them (the browser itself drives them in
// examples/operate): paged like the API, errors as pages.
func TestThePagesAreServedPagedAndFailAsPages(t *testing.T) {
	s := serve(t, admin.HandlerOptions{MaxPage: 2})
	status, body := raw(t, http.MethodGet, s.server.URL+"/", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `href="/executions/ex-done"`)
	require.Contains(t, body, `href="/executions/ex-moving"`)
	require.NotContains(t, body, `href="/executions/ex-pending"`, "the second page")
	require.Contains(t, body, `<a href="/?cursor=ex-moving">Next page →</a>`)
	_, body = raw(t, http.MethodGet, s.server.URL+"/?cursor=ex-moving", nil, nil)
	require.Contains(t, body, `href="/executions/ex-pending"`)
	require.Contains(t, body, `href="/executions/ex-running"`)
	_, body = raw(t, http.MethodGet, s.server.URL+"/?status=relocating", nil, nil)
	require.Contains(t, body, `href="/executions/ex-moving"`)
	require.NotContains(t, body, `href="/executions/ex-done"`)
	require.Contains(t, body, "Read-only: this controller accepts no writes")

	status, body = raw(t, http.MethodGet, s.server.URL+"/?status=runing", nil, nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, `&#34;runing&#34; is not a status of table teraslice`)
	status, _ = raw(t, http.MethodGet, s.server.URL+"/executions/ex-nobody", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	status, body = raw(t, http.MethodGet, s.server.URL+"/executions/ex-running", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "This controller accepts no writes: it configured no authorizer.")
	require.Contains(t, body, "<button type=\"submit\" disabled>")
	status, body = raw(t, http.MethodGet, s.server.URL+"/diagram", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<svg class="diagram" role="img" aria-label="the states of table teraslice"`)
	require.Equal(t, teraslice.Lifecycle().Len(), strings.Count(body, `class="node state `), "a box a state")
	d, err := schema.Describe("teraslice", teraslice.Roles())
	require.NoError(t, err)
	require.Equal(t, len(d.Table.Edges)+len(d.Table.Returns)+1, strings.Count(body, `class="edge`), "an arrow a move, and the initial one")
	require.Equal(t, len(d.Table.Returns), strings.Count(body, `class="edge return"`), "the return edges dashed apart")
	require.Regexp(t, `(?s)<g id="s3" class="node state running">.*?>running</text>\n<text [^>]*>1</text>`, body, "each box says how many are in it")
	require.NotContains(t, body, ">0000000<", "every count written in")
}

// A table's names come from the store: whatever they hold, the diagram
// draws them as text, and nothing of them is read as markup or as one of
// Graphviz's label escapes.
func TestADiagramDrawsHostileNamesAsText(t *testing.T) {
	hostile := []string{`<script>alert(1)</script>`, `a"b\N\G\l`, "line\nbreak", `&amp;`, "]];--"}
	b := transition.New(hostile[0])
	for i := range len(hostile) - 1 {
		b.Allow(hostile[i], hostile[i+1], "end")
	}
	b.Allow(hostile[len(hostile)-1], "end")
	table, err := b.Terminal("end").Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted(hostile[0]).Running(hostile[1:]...).Failed("end").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	_, err = schema.Save(timeout(t), store, "hostile", roles)
	require.NoError(t, err)
	s := serveStore(t, store, admin.HandlerOptions{})
	status, body := raw(t, http.MethodGet, s.server.URL+"/diagram", nil, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, "<script>")
	require.Contains(t, body, `&lt;script&gt;alert(1)&lt;/script&gt;`)
	require.Contains(t, body, `a&quot;b\N\G\l`, "a backslash stays a backslash")
	require.Contains(t, body, `&amp;amp;`)
	require.Equal(t, len(hostile)+1, strings.Count(body, `class="node state `))
}

// Every page draws what the store holds as text: a hostile state name,
// id, reason, owner or metadata value, and a hostile query or form
// field, is escaped wherever it is shown, never read as markup.
func TestEveryPageDrawsHostileTextAsText(t *testing.T) {
	const (
		stateMark  = `<script>alert("state")</script>`
		idMark     = `ex<script>alert("id")</script>`
		reasonMark = `<img src=x onerror=alert("reason")>`
		ownerMark  = `pod<svg onload=alert("owner")>`
		metaMark   = `<iframe src="meta">`
		formMark   = `<b onclick=alert("form")>`
	)
	table, err := transition.New("queued").Allow("queued", stateMark).Allow(stateMark, "stopping", "done").
		Allow("stopping", "done").Terminal("done").Build()
	require.NoError(t, err)
	roles, err := recovery.DefineRoles(table).NotStarted("queued").Running(stateMark).Stopping("stopping", "done").Failed("done").Build()
	require.NoError(t, err)
	store := storage.NewMemory()
	ctx := timeout(t)
	_, err = schema.Save(ctx, store, "hostile", roles)
	require.NoError(t, err)
	exec, err := transition.NewPersisted(table, store, idMark, transition.PersistedOptions{Actor: ownerMark})
	require.NoError(t, err)
	_, err = exec.Create(ctx, transition.To("queued").Because(reasonMark).Set("note", metaMark))
	require.NoError(t, err)
	_, _, err = exec.Acquire(ctx, storage.Lease{Holder: ownerMark, TTL: time.Minute}, func(cur string, _ storage.Record) (transition.Update[string], error) {
		return transition.To(stateMark).Because(reasonMark), nil
	})
	require.NoError(t, err)
	s := serveStore(t, store, admin.HandlerOptions{Authorize: allowAll})
	execution := s.server.URL + "/executions/" + url.PathEscape(idMark)
	pages := map[string]string{}
	for name, u := range map[string]string{
		"list":      s.server.URL + "/",
		"filtered":  s.server.URL + "/?status=" + url.QueryEscape(stateMark),
		"execution": execution,
		"diagram":   s.server.URL + "/diagram",
		"missing":   s.server.URL + "/executions/" + url.PathEscape(formMark),
	} {
		_, pages[name] = raw(t, http.MethodGet, u, nil, nil)
	}
	form := url.Values{"reason": {formMark}, "actor": {formMark}}
	_, pages["stop"] = raw(t, http.MethodPost, execution+"/stop", strings.NewReader(form.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {s.server.URL}})
	for name, body := range pages {
		for _, mark := range []string{stateMark, idMark, reasonMark, ownerMark, metaMark, formMark} {
			require.NotContains(t, body, mark, "the %s page shows %q as markup", name, mark)
		}
	}
	require.Contains(t, pages["list"], `&lt;script&gt;alert(&#34;state&#34;)&lt;/script&gt;`, "the state shown, escaped")
	require.Contains(t, pages["execution"], `&lt;img src=x onerror=alert(&#34;reason&#34;)&gt;`, "the reason shown, escaped")
	require.Contains(t, pages["execution"], `&lt;iframe src=&#34;meta&#34;&gt;`, "the metadata shown, escaped")
}

func TestHandlerOptionsAreChecked(t *testing.T) {
	store := storage.NewMemory()
	for _, opts := range []admin.HandlerOptions{{Path: "admin/"}, {Path: "/admin"}, {Timeout: -1}, {MaxPage: -1}, {MaxWatches: -1}, {WriteTimeout: -1}} {
		_, err := admin.NewHandler(store, opts)
		require.Error(t, err, "%+v", opts)
	}
	_, err := admin.NewHandler(nil, admin.HandlerOptions{})
	require.Error(t, err)
	for _, u := range []string{"ftp://x/", "http://", "http://u:p@host/", "http://host/?q=1", "::"} {
		_, err := admin.NewClient(u, admin.ClientOptions{})
		require.Error(t, err, u)
	}
}

// The operator's trial posted a stop with two objects in its body and
// the job stopped. Every malformed request is refused with the API's
// error shape, and nothing is written.
func TestAMalformedRequestWritesNothingAndSaysWhy(t *testing.T) {
	s := serve(t, admin.HandlerOptions{Authorize: allowAll})
	ctx := timeout(t)
	before, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	jsonType := http.Header{"Content-Type": {"application/json"}}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}}
	stop := s.server.URL + "/api/v1/executions/ex-running/stop"
	for _, tc := range []struct {
		name, method, url, body string
		header                  http.Header
		status                  int
		code, says              string
	}{
		{"two objects", http.MethodPost, stop, `{"reason":"x"} {"reason":"y"}`, jsonType, 400, "invalid", "more than one JSON object"},
		{"an object and garbage", http.MethodPost, stop, `{"reason":"x"} ]`, jsonType, 400, "invalid", "more than one JSON object"},
		{"text/plain", http.MethodPost, stop, `{"reason":"x"}`, http.Header{"Content-Type": {"text/plain"}}, 415, "unsupported_media_type", "must be application/json"},
		{"no content type", http.MethodPost, stop, `{"reason":"x"}`, nil, 415, "unsupported_media_type", "must be application/json"},
		{"an unknown field", http.MethodPost, stop, `{"reason":"x","now":true}`, jsonType, 400, "invalid", "unknown field"},
		{"an id with a control character", http.MethodPost, s.server.URL + "/api/v1/executions/ex%01running/stop", `{"reason":"x"}`, jsonType, 400, "invalid", "control character"},
		{"get of such an id", http.MethodGet, s.server.URL + "/api/v1/executions/ex%0Arunning", "", nil, 400, "invalid", "control character"},
		{"watch of such an id", http.MethodGet, s.server.URL + "/api/v1/watch?id=ex%1Brunning", "", nil, 400, "invalid", "control character"},
		{"a path nothing serves", http.MethodPost, s.server.URL + "/api/v2/executions/ex-running/stop", `{"reason":"x"}`, jsonType, 404, "no_route", "nothing is served"},
		{"a method the path has not", http.MethodPut, stop, `{"reason":"x"}`, jsonType, 405, "method_not_allowed", "served for POST"},
		{"a GET of the stop", http.MethodGet, stop, "", nil, 405, "method_not_allowed", "served for POST"},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		status, got := raw(t, tc.method, tc.url, body, tc.header)
		require.Equal(t, tc.status, status, "%s: %s", tc.name, got)
		var e struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal([]byte(got), &e), "%s: the API's error shape: %s", tc.name, got)
		require.Equal(t, tc.code, e.Error.Code, tc.name)
		require.Contains(t, e.Error.Message, tc.says, tc.name)
	}
	// The stop form, likewise.
	page := s.server.URL + "/executions/ex-running/stop"
	for _, tc := range []struct {
		name, body string
		header     http.Header
		status     int
		says       string
	}{
		{"a reason twice", "reason=x&reason=y", form, 400, "given 2 times"},
		{"a field the form has not", "reason=x&now=1", form, 400, "has no field"},
		{"JSON", `{"reason":"x"}`, http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"same-origin"}}, 415, "must be application/x-www-form-urlencoded"},
	} {
		status, got := raw(t, http.MethodPost, page, strings.NewReader(tc.body), tc.header)
		require.Equal(t, tc.status, status, tc.name)
		require.Contains(t, got, "<!doctype html>", "%s: a page", tc.name)
		require.Contains(t, got, tc.says, tc.name)
	}
	status, got := raw(t, http.MethodGet, s.server.URL+"/nothing/here", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, got, "<!doctype html>", "a page elsewhere")
	status, got = raw(t, http.MethodDelete, s.server.URL+"/executions/ex-running", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, status)
	require.Contains(t, got, "served for GET")

	after, err := s.store.Get(ctx, "ex-running")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "nothing written")
}

// A watch of an id that is not there says so at once, and then sees the
// record when it is made, instead of waiting silently.
// A watch of one id yields that record only, now and as it changes,
// whatever records sort after it (the first listing once let every one
// after the last id asked for through).
func TestAWatchOfOneIDYieldsThatRecordOnly(t *testing.T) {
	s := serve(t, admin.HandlerOptions{Authorize: allowAll})
	ctx, cancel := context.WithCancel(timeout(t))
	defer cancel()
	page, err := s.client.List(ctx, admin.ListOptions{})
	require.NoError(t, err)
	require.Greater(t, len(page.Items), 1)
	first := page.Items[0].ID
	w := watchInBackground(ctx, s.client, first, first)
	// The writes below come once the watch has listed: made before, they
	// would be in what it lists (level-triggered), never a change.
	w.waitFor(t, "the record watched, as it is", func(evs []admin.Event, _ error) bool { return len(evs) > 0 })
	_, err = s.client.Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "user asked", Actor: "operator"})
	require.NoError(t, err)
	other, err := transition.NewPersisted(teraslice.Lifecycle(), s.store, "ex-zz-later", transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	_, err = other.Create(ctx, transition.To(state.Pending))
	require.NoError(t, err)
	mark, err := transition.NewPersisted(teraslice.Lifecycle(), s.store, first, transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	_, _, err = mark.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
		return transition.To(cur).Set("note", "looked at"), nil
	})
	require.NoError(t, err)
	w.waitFor(t, "the change of the record watched", func(evs []admin.Event, _ error) bool {
		if len(evs) == 0 {
			return false
		}
		last := evs[len(evs)-1]
		return last.Type == admin.EventChanged && last.Record.Meta["note"] == "looked at"
	})
	for _, ev := range w.events {
		require.Equal(t, first, ev.ID, "only the record watched")
	}
	require.Equal(t, admin.EventCurrent, w.events[0].Type)
	cancel()
	w.ended(t, "the watch ends with its context")
}

func TestAWatchOfAnIDThatIsNotThereSaysSo(t *testing.T) {
	s := serve(t, admin.HandlerOptions{})
	ctx, cancel := context.WithCancel(timeout(t))
	defer cancel()
	w := watchInBackground(ctx, s.client, "ex-later", "ex-running")
	w.waitFor(t, "the id that is not there, gone", func(evs []admin.Event, _ error) bool {
		return len(evs) == 2 && evs[0].Type == admin.EventCurrent && evs[0].ID == "ex-running" &&
			evs[1].Type == admin.EventGone && evs[1].ID == "ex-later"
	})
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s.store, "ex-later", transition.PersistedOptions{Actor: "cluster-master"})
	require.NoError(t, err)
	_, err = exec.Create(ctx, transition.To(state.Pending))
	require.NoError(t, err)
	w.waitFor(t, "the record made later", func(evs []admin.Event, _ error) bool {
		last := evs[len(evs)-1]
		return last.Type == admin.EventChanged && last.ID == "ex-later" && last.Record.Status == "pending"
	})
	cancel()
	w.ended(t, "the watch ends with its context")
}

// The operator's trial: through version 1's handler, a stop of a job in
// quarantined (a status only version 2 has) was accepted and written,
// and version 1 never acted on it; so was a stop of a job whose owner
// was dead. A controller that says which table it serves refuses the
// first unless forced, flags the second, and its pages say both.
func TestAStopNobodyWillActOnIsRefusedOrFlagged(t *testing.T) {
	ctx := timeout(t)
	store := storage.NewMemory()
	v1, v2 := schematest.CIJobs(t, ""), schematest.CIJobs(t, "quarantined")
	_, err := schema.Save(ctx, store, "ci-jobs", v1)
	require.NoError(t, err)
	_, err = schema.Save(ctx, store, "ci-jobs", v2)
	require.NoError(t, err)
	job := func(id string, path ...string) *transition.Persisted[string] {
		exec, err := transition.NewPersisted(v2.Table(), store, id, transition.PersistedOptions{Actor: "master"})
		require.NoError(t, err)
		_, err = exec.Create(ctx, transition.To("queued"))
		require.NoError(t, err)
		for _, s := range path {
			_, err = exec.Fire(ctx, s, "")
			require.NoError(t, err)
		}
		return exec
	}
	job("job-q", "starting", "running", "quarantined")
	dead, err := transition.NewPersisted(v1.Table(), store, "job-dead", transition.PersistedOptions{Actor: "ctl-a"})
	require.NoError(t, err)
	job("job-dead", "starting", "running")
	_, _, err = dead.Acquire(ctx, storage.Lease{Holder: "ctl-a", TTL: time.Hour}, nil)
	require.NoError(t, err)
	require.NoError(t, dead.Ownership().Release(ctx), "its controller died")
	live, err := transition.NewPersisted(v1.Table(), store, "job-live", transition.PersistedOptions{Actor: "ctl-b"})
	require.NoError(t, err)
	job("job-live", "starting", "running")
	_, _, err = live.Acquire(ctx, storage.Lease{Holder: "ctl-b", TTL: time.Hour}, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, live.Ownership().Release(context.Background())) }()

	serves, err := schema.Describe("ci-jobs", v1)
	require.NoError(t, err)
	s := serveStore(t, store, admin.HandlerOptions{Authorize: allowAll, Serves: serves})

	before, err := store.Get(ctx, "job-q")
	require.NoError(t, err)
	_, err = s.client.Stop(ctx, admin.StopRequest{ID: "job-q", Reason: "user asked", Actor: "ops"})
	require.ErrorIs(t, err, recovery.ErrForeignStatus, "matched over HTTP as on the store")
	require.ErrorContains(t, err, "job-q is in quarantined, which this controller's table (ci-jobs version 1) does not know (version 2 of the table knows it)")
	var apiErr *admin.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "foreign_status", apiErr.Code)
	after, err := store.Get(ctx, "job-q")
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "nothing written")

	forced, err := s.client.Stop(ctx, admin.StopRequest{ID: "job-q", Reason: "user asked", Actor: "ops", Force: true})
	require.NoError(t, err)
	require.Equal(t, "draining", forced.To)
	require.Len(t, forced.Warnings, 2)
	require.Contains(t, forced.Warnings[0], "forced: job-q is in quarantined")
	require.Contains(t, forced.Warnings[1], "no controller holds job-q now (it has no owner)")

	stopped, err := s.client.Stop(ctx, admin.StopRequest{ID: "job-dead", Reason: "user asked", Actor: "ops"})
	require.NoError(t, err)
	require.Equal(t, []string{"no controller holds job-dead now (its owner ctl-a@1 holds it no more): the stop is carried out by the controller that takes it over, " +
		"or a Reaper ends it once it has been draining for 5m0s (the table's deadline)"}, stopped.Warnings)
	stopped, err = s.client.Stop(ctx, admin.StopRequest{ID: "job-live", Reason: "user asked", Actor: "ops"})
	require.NoError(t, err)
	require.Empty(t, stopped.Warnings, "its controller is alive and acts on it")

	// The pages say which version this controller serves, and why a
	// stop would wait.
	_, page := raw(t, http.MethodGet, s.server.URL+"/", nil, nil)
	require.Contains(t, page, `version 2 recorded · this controller serves <b class="serves">version 1</b>`)
	job("job-q2", "starting", "running", "quarantined")
	_, page = raw(t, http.MethodGet, s.server.URL+"/executions/job-q2", nil, nil)
	require.Contains(t, page, "job-q2 is in quarantined, which this controller&#39;s table (ci-jobs version 1) does not know")
	require.Contains(t, page, `name="force"`)
	require.Contains(t, page, "No controller holds it now")
	_, page = raw(t, http.MethodGet, s.server.URL+"/executions/job-live", nil, nil)
	require.Contains(t, page, "ctl-b@1 holds it: its controller is alive")
	_, page = raw(t, http.MethodGet, s.server.URL+"/executions/job-dead", nil, nil)
	require.Contains(t, page, `holder gone">nobody holds it`)
	// The form refuses, then forces, as the API does.
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}}
	status, page := raw(t, http.MethodPost, s.server.URL+"/executions/job-q2/stop", strings.NewReader("reason=x"), form)
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, page, "force the stop")
	status, _ = raw(t, http.MethodPost, s.server.URL+"/executions/job-q2/stop", strings.NewReader("reason=x&force=1"), form)
	require.Equal(t, http.StatusSeeOther, status)
	rec, err := store.Get(ctx, "job-q2")
	require.NoError(t, err)
	require.Equal(t, "draining", rec.Status)
}

// The operator's trial: the timeline was oldest first, its controller's
// progress writes pushed the stop to the bottom, and it gave neither
// relative times nor durations. It is newest first, the progress folded
// into the change it follows (a take-over, which changes the owner,
// stays a change of its own), each change with the revision it wrote
// and how long the execution stayed in the status it entered.
func TestTheTimelineIsNewestFirstWithProgressFolded(t *testing.T) {
	ctx := timeout(t)
	store := storage.NewMemory()
	populate(t, store)
	ctl, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-running", transition.PersistedOptions{Actor: "pod-b"})
	require.NoError(t, err)
	_, _, err = ctl.Acquire(ctx, storage.Lease{Holder: "pod-b", TTL: time.Hour, Reason: "controller started"}, nil)
	require.NoError(t, err)
	for k := range 5 {
		_, _, err = ctl.Apply(ctx, func(cur state.Status, _ storage.Record) (transition.Update[state.Status], error) {
			return transition.To(cur).Set("slices", fmt.Sprint(k)).Because(fmt.Sprintf("%d slices done", k)), nil
		})
		require.NoError(t, err)
	}
	s := serveStore(t, store, admin.HandlerOptions{Authorize: allowAll})
	stopped, err := s.client.Stop(ctx, admin.StopRequest{ID: "ex-running", Reason: "user asked", Actor: "ops"})
	require.NoError(t, err)

	_, page := raw(t, http.MethodGet, s.server.URL+"/executions/ex-running", nil, nil)
	list := page[strings.Index(page, `<ol class="timeline"`):]
	list = list[:strings.Index(list, "</section>")]
	items := strings.Split(list, `<li class="`)[1:] // each change's row, whole (the folded writes' rows have no class)
	require.Len(t, items, 6, "created, three moves, the take-over (its progress folded in), the stop")
	first := items[0]
	require.Contains(t, first, "running → stopping")
	require.Contains(t, first, fmt.Sprintf("revision %d", stopped.Revision), "the revision the stop reported")
	require.Regexp(t, `<span class="stayed">for \d+ s so far</span>`, first)
	require.Contains(t, first, "just now")
	takeOver := items[1]
	require.Contains(t, takeOver, "running (same status)")
	require.Contains(t, takeOver, "by pod-b (pod-b@1)")
	require.Contains(t, takeOver, "5 more writes in the same status")
	require.Contains(t, takeOver, "4 slices done", "the newest folded write first")
	require.Less(t, strings.Index(takeOver, "4 slices done"), strings.Index(takeOver, "0 slices done"))
	require.Contains(t, items[2], "initializing → running")
	require.Regexp(t, `<span class="stayed">for [0-9]`, items[2], "how long it ran before the stop")
	require.Contains(t, items[5], "created in pending")
	require.Regexp(t, `<time datetime="2026-12-03T12:00:\d\dZ" title="2026-12-03T12:00:\d\dZ">\d+ d( \d+ h)? ago</time>`, items[5])
	require.Contains(t, page, `data-watch="/api/v1/watch?id=ex-running"`, "the page's script follows the execution")
}

// An operator finds an execution by its id, or by what they remember of
// it, from the list page; the API lists by it too.
func TestAnExecutionIsFoundByID(t *testing.T) {
	s := serve(t, admin.HandlerOptions{})
	status, _ := raw(t, http.MethodGet, s.server.URL+"/?q=ex-moving", nil, nil)
	require.Equal(t, http.StatusSeeOther, status, "a whole id opens its page")
	status, page := raw(t, http.MethodGet, s.server.URL+"/?q=-mov", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `whose id contains “-mov”`)
	require.Contains(t, page, `href="/executions/ex-moving"`)
	require.NotContains(t, page, `href="/executions/ex-running"`)
	p, err := s.client.List(timeout(t), admin.ListOptions{IDContains: "run"})
	require.NoError(t, err)
	require.Equal(t, []string{"ex-running"}, ids(p.Items))
	_, page = raw(t, http.MethodGet, s.server.URL+"/?q=nothing-like-it", nil, nil)
	require.Contains(t, page, "No execution")
}

// The page's script is the handler's own, and the pages allow no other.
func TestThePagesRunOnlyTheHandlersOwnScript(t *testing.T) {
	s := serve(t, admin.HandlerOptions{})
	resp, err := http.Get(s.server.URL + "/executions/ex-running")
	require.NoError(t, err)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self'")
	require.Contains(t, csp, "connect-src 'self'")
	require.Contains(t, csp, "default-src 'none'")
	status, body := raw(t, http.MethodGet, s.server.URL+"/assets/live.js", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "api/v1/watch")
}

// A store that lists only whole (a user's own) is read whole for each
// page, and pages and counts the same.
func TestAListOverAStoreThatListsOnlyWhole(t *testing.T) {
	ctx := timeout(t)
	store := storage.NewMemory()
	_, err := schema.Save(ctx, store, "teraslice", teraslice.Roles())
	require.NoError(t, err)
	for i := range 5 {
		exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, fmt.Sprintf("ex-%d", i), transition.PersistedOptions{Actor: "master"})
		require.NoError(t, err)
		_, err = exec.Create(ctx, transition.To([]state.Status{state.Pending, state.Completed}[i%2]))
		require.NoError(t, err)
	}
	op, err := admin.NewStoreOperator(wholeStore{store})
	require.NoError(t, err)
	p, err := op.List(ctx, admin.ListOptions{Statuses: []string{"pending"}, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"ex-0", "ex-2"}, ids(p.Items))
	require.Equal(t, "ex-2", p.Next)
	require.Equal(t, liveCounts(map[string]int{"pending": 3}), p.Counts)
	p, err = op.List(ctx, admin.ListOptions{Statuses: []string{"pending"}, Limit: 2, Cursor: p.Next})
	require.NoError(t, err)
	require.Equal(t, []string{"ex-4"}, ids(p.Items))
	require.Empty(t, p.Next)
}

// wholeStore is a store of a user's that lists only whole.
type wholeStore struct{ *storage.Memory }

func (wholeStore) ListPage() {} // hides Memory's: not a storage.PageLister

// A backup is streamed whole when the controller serves one and the
// Authorizer allows it; a controller without an Authorizer sends no copy
// of its store, and one that serves no backup says so.
func TestABackupIsStreamedOnlyWhereServedAndAllowed(t *testing.T) {
	ctx := timeout(t)
	made := []byte("a backup's bytes, as the controller's store makes them\n")
	backup := func(_ context.Context, path string) (uint64, error) { return 42, os.WriteFile(path, made, 0o600) }
	s := serve(t, admin.HandlerOptions{Authorize: allowAll, Backup: backup})
	var got bytes.Buffer
	revision, n, err := s.client.Backup(ctx, &got)
	require.NoError(t, err)
	require.Equal(t, uint64(42), revision)
	require.Equal(t, int64(len(made)), n)
	require.Equal(t, made, got.Bytes())

	open := serve(t, admin.HandlerOptions{Backup: backup})
	_, _, err = open.client.Backup(ctx, io.Discard)
	require.ErrorIs(t, err, admin.ErrForbidden, "no Authorizer: no copy of the whole store")

	none := serve(t, admin.HandlerOptions{Authorize: allowAll})
	_, _, err = none.client.Backup(ctx, io.Discard)
	require.ErrorIs(t, err, admin.ErrCannotBackup)
}

// A delete through either operator removes an ended execution, archived
// first by the handler's archive; a live one only when forced, one a
// controller holds never; a handler without an Authorizer deletes
// nothing.
func TestADeleteRemovesWhatHasEndedAndWhatIsForced(t *testing.T) {
	ctx := timeout(t)
	path := filepath.Join(t.TempDir(), "retired.jsonl")
	kept, err := archive.Open(path)
	require.NoError(t, err)
	defer kept.Close()
	s := serve(t, admin.HandlerOptions{Authorize: allowAll, Archive: kept})
	local, err := admin.NewStoreOperator(s.store)
	require.NoError(t, err)
	for name, op := range map[string]admin.Operator{"http": s.client, "store": local} {
		_, err := op.Delete(ctx, admin.DeleteRequest{ID: "ex-running", Reason: "tidying", Actor: "operator"})
		require.ErrorIs(t, err, transition.ErrNotEnded, name)
		_, err = op.Delete(ctx, admin.DeleteRequest{ID: "ex-running", Reason: " ", Actor: "operator"})
		require.ErrorIs(t, err, admin.ErrInvalidRequest, name)
	}
	got, err := s.client.Delete(ctx, admin.DeleteRequest{ID: "ex-done", Reason: "kept long enough", Actor: "operator"})
	require.NoError(t, err)
	require.Equal(t, admin.Deleted{ID: "ex-done", Status: "completed", Revision: got.Revision, Actor: "operator", Reason: "kept long enough"}, got)
	_, err = s.store.Get(ctx, "ex-done")
	require.ErrorIs(t, err, storage.ErrNotFound)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	archived, err := archive.NewReader(f).Next()
	require.NoError(t, err)
	require.Equal(t, "ex-done", archived.Record.ID)
	require.Equal(t, "kept long enough", archived.Reason)

	_, err = local.Delete(ctx, admin.DeleteRequest{ID: "ex-pending", Reason: "a duplicate submission", Actor: "operator", Force: true})
	require.NoError(t, err)
	_, _, err = s.store.Acquire(ctx, "ex-running", storage.Lease{Holder: "pod-b", TTL: time.Minute})
	require.NoError(t, err)
	_, err = s.client.Delete(ctx, admin.DeleteRequest{ID: "ex-running", Reason: "a duplicate submission", Actor: "operator", Force: true})
	require.ErrorIs(t, err, storage.ErrHeld, "a live controller is never overruled")

	closed := serve(t, admin.HandlerOptions{})
	_, err = closed.client.Delete(ctx, admin.DeleteRequest{ID: "ex-done", Reason: "kept long enough", Actor: "operator"})
	require.ErrorIs(t, err, admin.ErrForbidden)
}

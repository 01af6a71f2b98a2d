package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

// Response bounds: a client never holds more than this of what a handler
// (or something posing as one) sends.
const (
	// maxResponse bounds one answer: a page of the largest records.
	maxResponse = 256 << 20
	// maxErrorBody bounds a failed request's body.
	maxErrorBody = 64 << 10
	// maxEventLine bounds one event of a watch: one record, in JSON.
	maxEventLine = 16 << 20
)

// ClientOptions configure a [Client]; the zero value uses a plain
// http.Client and sends no credentials.
type ClientOptions struct {
	// HTTPClient makes the requests: set its Transport for TLS (a CA,
	// a client certificate). Its Timeout, if any, also ends watches;
	// bound each call with its context instead.
	HTTPClient *http.Client
	// Username and Password, if Username is set, are sent with every
	// request as HTTP basic authentication, for an Authorizer that reads
	// them (over HTTPS only: basic authentication is not encrypted).
	Username, Password string
}

// Client is an [Operator] that asks a controller's [Handler] over HTTP:
// the execfsm CLI's --http. Its errors are [*Error] values that match
// the same sentinels as a StoreOperator's, or the transport's errors.
type Client struct {
	base *url.URL
	http *http.Client
	opts ClientOptions
}

var _ Operator = (*Client)(nil)

// NewClient returns a client of the handler at baseURL, the URL of its
// Path ("https://ctl.example:8443/admin/").
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("admin: NewClient: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("admin: NewClient: %q is not an http:// or https:// URL", baseURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("admin: NewClient: %q holds credentials: give them in ClientOptions, so that the URL can be shown", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("admin: NewClient: %q: a base URL has no query or fragment", baseURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	c := &Client{base: u, http: opts.HTTPClient, opts: opts}
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

// URL returns the handler's URL the client was made with.
func (c *Client) URL() string { return c.base.String() }

// do sends a request to path (under the API) and returns the response of
// a success; any other answer is an error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, accept string) (*http.Response, error) {
	u := c.base.JoinPath("api/v1", path)
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.Username != "" {
		req.SetBasicAuth(c.opts.Username, c.opts.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, errorOf(resp)
	}
	return resp, nil
}

// errorOf reads a failed answer's error; something that is not a
// handler's error is still told with its status.
func errorOf(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body wireError
	if err := json.Unmarshal(data, &body); err == nil && body.Error.Code != "" {
		return &Error{StatusCode: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
	}
	text := strings.TrimSpace(string(data))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	code := "http"
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusBadGateway {
		code = "unavailable" // a proxy in front of a controller that is not there
	}
	return &Error{StatusCode: resp.StatusCode, Code: code, Message: fmt.Sprintf("admin: %s from %s: %q", resp.Status, resp.Request.URL.Redacted(), text)}
}

// get sends a GET and decodes its JSON answer with decode.
func get[T any](ctx context.Context, c *Client, path string, query url.Values, decode func([]byte) (T, error)) (T, error) {
	var zero T
	resp, err := c.do(ctx, http.MethodGet, path, query, nil, "application/json")
	if err != nil {
		return zero, err
	}
	defer resp.Body.Close()
	data, err := readAll(resp.Body)
	if err != nil {
		return zero, err
	}
	v, err := decode(data)
	if err != nil {
		return zero, fmt.Errorf("admin: %s answered %s with what is not its answer: %w", c.base.Redacted(), path, err)
	}
	return v, nil
}

func readAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxResponse+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("admin: an answer over %d bytes", maxResponse)
	}
	return data, nil
}

// Table implements [Operator].
func (c *Client) Table(ctx context.Context) (schema.Document, error) {
	return get(ctx, c, "table", nil, schema.Decode)
}

// Get implements [Operator].
func (c *Client) Get(ctx context.Context, id string) (storage.Record, error) {
	if err := storage.ValidateID(id); err != nil {
		return storage.Record{}, fmt.Errorf("admin: get: %w", err)
	}
	return get(ctx, c, "executions/"+url.PathEscape(id), nil, func(data []byte) (storage.Record, error) {
		var rec storage.Record
		if err := rec.DecodeJSON(data); err != nil {
			return rec, err
		}
		if rec.ID != id {
			return storage.Record{}, fmt.Errorf("the record of %q, not of %q", rec.ID, id)
		}
		return rec, nil
	})
}

// List implements [Operator]. A Limit of 0 asks for the handler's
// largest page.
func (c *Client) List(ctx context.Context, opts ListOptions) (Page, error) {
	q := url.Values{}
	if len(opts.Statuses) > 0 {
		q.Set("status", strings.Join(opts.Statuses, ","))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.IDContains != "" {
		q.Set("q", opts.IDContains)
	}
	switch {
	case opts.Limit < 0:
		return Page{}, fmt.Errorf("admin: list: %w: limit %d", ErrInvalidRequest, opts.Limit)
	case opts.Limit > 0:
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return get(ctx, c, "executions", q, decodePage)
}

// Stop implements [Operator]. The handler's Authorizer decides, and
// names the actor the trail records.
func (c *Client) Stop(ctx context.Context, req StopRequest) (Stopped, error) {
	if err := storage.ValidateID(req.ID); err != nil {
		return Stopped{}, fmt.Errorf("admin: stop: %w", err)
	}
	var s Stopped
	err := postWrite(ctx, c, req.ID, "stop", stopBody{Reason: req.Reason, Actor: req.Actor, Force: req.Force}, &s, &s.ID)
	return s, err
}

// postWrite posts a write (what: stop, delete) of execution id with
// body, and decodes its answer into into, whose id (at answered) must be
// id.
func postWrite(ctx context.Context, c *Client, id, what string, body stopBody, into any, answered *string) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "executions/"+url.PathEscape(id)+"/"+what, nil, raw, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := readAll(resp.Body)
	if err != nil {
		return err
	}
	if err := strictJSON(data, into); err != nil {
		return fmt.Errorf("admin: %s answered a %s with what is not its answer: %w", c.base.Redacted(), what, err)
	}
	if *answered != id {
		return fmt.Errorf("admin: %s answered the %s of %q with one of %q", c.base.Redacted(), what, id, *answered)
	}
	return nil
}

// Watch implements [Operator]. A stream that ends while ctx is live (the
// handler dropped a client that did not read in time, was closed, or the
// connection broke) ends with an error matching ErrDropped, or the
// handler's own error.
func (c *Client) Watch(ctx context.Context, ids ...string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		q := url.Values{}
		for _, id := range ids {
			if err := storage.ValidateID(id); err != nil {
				yield(Event{}, fmt.Errorf("admin: watch: %w", err))
				return
			}
			q.Add("id", id)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the request, whoever stops first
		resp, err := c.do(ctx, http.MethodGet, "watch", q, nil, "application/x-ndjson")
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(make([]byte, 0, 64<<10), maxEventLine)
		for lines.Scan() {
			ev, err := decodeLine(lines.Bytes())
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		why := "the handler ended it"
		if err := lines.Err(); err != nil {
			why = err.Error()
		}
		yield(Event{}, fmt.Errorf("admin: watch of %s: %w: %s", c.base.Redacted(), ErrDropped, why))
	}
}

// decodeLine reads one line of a watch: an event, or the handler's error
// that ends the stream.
func decodeLine(line []byte) (Event, error) {
	// An event's "error" is a string (why a record cannot be read); the
	// handler's error is an object.
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		return Event{}, fmt.Errorf("admin: watch: a line that is not an event: %w", err)
	}
	if bytes.HasPrefix(probe.Error, []byte("{")) {
		var body wireError
		if err := strictJSON(line, &body); err != nil || body.Error.Code == "" {
			return Event{}, fmt.Errorf("admin: watch: a line that is neither an event nor an error: %q", line)
		}
		status := http.StatusInternalServerError
		for _, k := range errorKinds {
			if k.code == body.Error.Code {
				status = k.status
				break
			}
		}
		return Event{}, &Error{StatusCode: status, Code: body.Error.Code, Message: body.Error.Message}
	}
	var ev Event
	if err := ev.UnmarshalJSON(line); err != nil {
		return Event{}, fmt.Errorf("admin: watch: a line that is not an event: %w", err)
	}
	return ev, nil
}

// Backup writes the backup the controller's handler makes
// (HandlerOptions.Backup) to w and returns the revision it is the store
// at and its size. The handler refuses it (ErrCannotBackup) when its
// controller serves none.
func (c *Client) Backup(ctx context.Context, w io.Writer) (revision uint64, size int64, err error) {
	resp, err := c.do(ctx, http.MethodGet, "backup", nil, nil, "application/octet-stream")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	revision, err = strconv.ParseUint(resp.Header.Get(revisionHeader), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("admin: backup: %s answered no revision (%s %q)", c.base.Redacted(), revisionHeader, resp.Header.Get(revisionHeader))
	}
	size, err = io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && size != resp.ContentLength {
		err = fmt.Errorf("admin: backup: %d of its %d bytes came", size, resp.ContentLength)
	}
	return revision, size, err
}

// Delete implements [Operator]: the handler archives the record, if its
// controller keeps an archive (HandlerOptions.Archive); req.Archive is
// not sent.
func (c *Client) Delete(ctx context.Context, req DeleteRequest) (Deleted, error) {
	if err := req.check(); err != nil {
		return Deleted{}, err
	}
	var d Deleted
	err := postWrite(ctx, c, req.ID, "delete", stopBody{Reason: req.Reason, Actor: req.Actor, Force: req.Force}, &d, &d.ID)
	return d, err
}

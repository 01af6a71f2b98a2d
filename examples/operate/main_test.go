package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The test binary is also the controller the operator starts.
func TestMain(m *testing.M) {
	asChild()
	goleak.VerifyTestMain(m)
}

// bound is how long a test waits for anything.
const bound = time.Minute

func TestTheOperatorStopsAnExecutionOfALiveBoltController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var out strings.Builder
	require.NoError(t, operate(ctx, t.TempDir(), false, &out))
	t.Log(out.String())
	for _, want := range []string{
		"ex-4  failed     ctl-1@1  slicer: reader failed: index logs-2026.12 not found",
		"2. A stop without the password is refused: unauthenticated: writes need the operator's password",
		"current  ex-3  running  owner ctl-1@1",
		"stop: running → stopping at revision",
		"changed  ex-3  stopped  owner ctl-1@1",
		"4. SIGTERM: the controller exited (exit 143)",
		"ex-2  relocating  ctl-1@1  SIGTERM in running status",
		"ex-3  stopped     ctl-1@1  stopped on request",
		"running       → stopping      operator:operator  user asked",
		"stopping      → stopped       ctl-1              stopped on request",
	} {
		require.Contains(t, out.String(), want)
	}
}

// screenshots is where the page tests leave their screenshots: the
// directory $EXECFSM_SCREENSHOTS names (to look at them), or the test's.
func screenshots(t *testing.T) string {
	if dir := os.Getenv("EXECFSM_SCREENSHOTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

// browser starts a headless Chromium (Debian's package; .ci/run installs
// it), as the operator's browser.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		var err error
		path, err = exec.LookPath("chromium")
		require.NoError(t, err, "the page is tested in a real Chromium: install Debian's chromium package (.ci/run does), or set CHROMIUM")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	ctx, cancel := context.WithTimeout(ctx, 2*bound)
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc() // waits for Chromium to exit
	})
	return ctx
}

// page drives one tab of the browser, failing the test on any error.
// Every selector is a CSS selector (chromedp.CSS): chromedp's
// plain string is a search that also matches text, and "table" then finds the words
// "table teraslice" in the header, a text node that is never visible.
type page struct {
	t   *testing.T
	ctx context.Context
	dir string // where screenshots go
}

// stepLimit bounds each step in the browser: a page that never shows
// what a step waits for fails that step, by its line.
const stepLimit = 20 * time.Second

func (p page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepLimit)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.shot("failed")
		require.NoError(p.t, err)
	}
}

// text is the visible text of the element sel finds, read in one
// evaluation in the page: the execution page replaces its live parts
// whenever the execution changes (live.js), and a read that found the
// node first and asked for its text next could find it gone ("No node
// with given id found").
func (p page) text(sel string) string {
	p.t.Helper()
	p.do(chromedp.WaitVisible(chromedp.CSS(sel)))
	quoted, err := json.Marshal(sel)
	require.NoError(p.t, err)
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector(`+string(quoted)+`).innerText`))
	require.NoError(p.t, err)
	return s
}

func (p page) location() string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Location())
	require.NoError(p.t, err)
	return s
}

// shot saves a screenshot of the whole page as name.png.
func (p page) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, name+".png"), png, 0o644))
}

// TestThePageInAHeadlessChromium drives the controller's page as an
// operator does: the executions by status, one execution's timeline, the
// diagram, a stop through the form with the operator's credentials, and
// a form posted from another site, refused.
func TestThePageInAHeadlessChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	defer cancel()
	var g proc.Group
	defer g.KillAll()
	live, err := startController(ctx, &g, t.TempDir())
	require.NoError(t, err)
	client, err := admin.NewClient(live.url, admin.ClientOptions{})
	require.NoError(t, err)
	p := page{t: t, ctx: browser(t), dir: screenshots(t)}
	// The operator's browser sends its credentials (as after a login).
	credentials := "Basic " + base64.StdEncoding.EncodeToString([]byte(operatorUser+":"+live.password))
	_, err = chromedp.Call(p.ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	_, err = chromedp.Call(p.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": credentials}})
	require.NoError(t, err)

	// The executions, counted by status in the table's order.
	p.do(chromedp.Navigate(live.url), chromedp.WaitVisible(chromedp.CSS(`table.list`)))
	p.shot("list")
	text := p.text(`body`)
	for _, want := range []string{"table teraslice · version 1 recorded · this controller serves version 1", "4 live\nall", "3\nrunning", "1\npending", "—\ncompleted", "—\nfailed", "ex-5", "slicer: reader failed"} {
		require.Contains(t, text, want)
	}
	// Found by what the operator remembers of its id.
	p.do(chromedp.SendKeys(chromedp.CSS(`form.search input`), "x-"), chromedp.Click(chromedp.CSS(`form.search button`)), chromedp.WaitVisible(chromedp.CSS(`h1 .note`)))
	require.Contains(t, p.text(`h1`), "whose id contains “x-”")
	p.do(chromedp.SetValue(chromedp.CSS(`form.search input`), "ex-3"), chromedp.Click(chromedp.CSS(`form.search button`)), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)))
	require.Contains(t, p.location(), "/executions/ex-3", "a whole id opens its page")
	p.do(chromedp.Navigate(live.url), chromedp.WaitVisible(chromedp.CSS(`table.list`)))
	// One status: the running ones alone.
	p.do(chromedp.Click(chromedp.CSS(`a.count.running`)), chromedp.WaitVisible(chromedp.CSS(`a.count.running.selected`)))
	p.shot("list-running")
	require.Contains(t, p.location(), "?status=running")
	text = p.text(`table.list tbody`)
	require.Equal(t, 3, strings.Count(text, "workers connected"), text)
	require.NotContains(t, text, "ex-1")
	// One execution: its fields and its timeline.
	p.do(chromedp.Click(chromedp.CSS(`a[href$="/executions/ex-3"]`)), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)),
		chromedp.WaitVisible(chromedp.CSS(`.live.on`))) // its script follows the execution
	p.shot("execution")
	text = p.text(`body`)
	for _, want := range []string{"created in pending", "pending → scheduling", "initializing → running", "by ctl-1 (ctl-1@1)", "workers connected", "Stop ex-3",
		"ctl-1@1 holds it: its controller is alive", "so far", "just now"} {
		require.Contains(t, text, want)
	}
	timeline := p.text(`ol.timeline`)
	require.Less(t, strings.Index(timeline, "initializing → running"), strings.Index(timeline, "created in pending"), "newest first")
	// A stop through the form, as the operator.
	p.do(chromedp.SendKeys(chromedp.CSS(`form.stop textarea`), "asked in the browser"), chromedp.Click(chromedp.CSS(`form.stop button`)), chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	p.shot("stopped")
	text = p.text(`.flash.ok`)
	require.Contains(t, text, "Stop asked: running → stopping at revision")
	require.Contains(t, text, "by operator:operator")
	// The controller sees the stop and ends the execution: the page
	// shows it without a reload, from the watch.
	p.do(chromedp.WaitVisible(chromedp.CSS(`ol.timeline li.ended`)))
	p.shot("ended")
	text = p.text(`ol.timeline`)
	require.Contains(t, text, "stopping → stopped")
	require.Contains(t, text, "asked in the browser")
	require.Less(t, strings.Index(text, "stopping → stopped"), strings.Index(text, "running → stopping"), "newest first")
	// And a change made elsewhere, on another execution's page.
	p.do(chromedp.Navigate(live.url+"executions/ex-6"), chromedp.WaitVisible(chromedp.CSS(`.live.on`)))
	operator, err := admin.NewClient(live.url, admin.ClientOptions{Username: operatorUser, Password: live.password})
	require.NoError(t, err)
	_, err = operator.Stop(ctx, admin.StopRequest{ID: "ex-6", Reason: "stopped from the CLI", Actor: "operator"})
	require.NoError(t, err)
	p.do(chromedp.WaitVisible(chromedp.CSS(`ol.timeline li.ended`)))
	require.Contains(t, p.text(`ol.timeline`), "stopped from the CLI")
	p.shot("followed")
	// The diagram, with the counts.
	p.do(chromedp.Navigate(live.url+"diagram"), chromedp.WaitVisible(chromedp.CSS(`svg.diagram`)))
	p.shot("diagram")
	nodes, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.diagram g.node.state").length`))
	require.NoError(t, err)
	require.Equal(t, teraslice.Lifecycle().Len(), nodes, "every status of Teraslice's table, relocating included")
	label, err := chromedp.Run(p.ctx, chromedp.TextContent(chromedp.CSS(`svg.diagram`))) // an SVG has no innerText
	require.NoError(t, err)
	require.Contains(t, label, "relocating")

	// Another site's page posts the stop form to the controller, with
	// the operator's credentials in the browser: refused, nothing
	// written. (localhost and 127.0.0.1 are different origins.)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>win a prize</title><form method="post" action="%sexecutions/ex-2/stop">
<input type="hidden" name="reason" value="clicked a prize"><button id="prize">Claim your prize</button></form>`, live.url)
	}))
	defer evil.Close()
	p.do(chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)), chromedp.Click(chromedp.CSS(`#prize`)), chromedp.WaitVisible(chromedp.CSS(`.flash.err`)))
	p.shot("cross-site")
	require.Contains(t, p.text(`body`), "cross-origin request may not write")
	require.Contains(t, p.location(), "/executions/ex-2/stop")
	rec, err := client.Get(ctx, "ex-2")
	require.NoError(t, err)
	require.Equal(t, "running", rec.Status, "nothing written")
	t.Logf("screenshots in %s", p.dir)
}

// TestTheDiagramRoutesNoEdgeThroughAState draws three tables as the page
// does (Teraslice's, the operator's trial's version 2, and one of 30
// states) and checks, in the browser, what a reader trusts: no arrow
// passes through a state it does not join, so no move appears that the
// table does not have.
func TestTheDiagramRoutesNoEdgeThroughAState(t *testing.T) {
	p := page{t: t, ctx: browser(t), dir: screenshots(t)}
	// The browser starts on its own context: a step's, which ends with
	// the step, would close it.
	require.NoError(t, chromedp.Do(p.ctx))
	for _, tc := range []struct {
		name  string
		roles func(t *testing.T) (schema.Document, error)
	}{
		{"teraslice", func(*testing.T) (schema.Document, error) { return schema.Describe("teraslice", teraslice.Roles()) }},
		{"ci-jobs-v2", func(t *testing.T) (schema.Document, error) {
			return schema.Describe("ci-jobs", schematest.CIJobs(t, "quarantined"))
		}},
		{"thirty-states", func(t *testing.T) (schema.Document, error) { return schema.Describe("thirty", thirtyStates(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.roles(t)
			require.NoError(t, err)
			table, roles, err := d.Rebuild()
			require.NoError(t, err)
			store := storage.NewMemory()
			_, err = schema.Save(context.Background(), store, d.Name, roles)
			require.NoError(t, err)
			h, err := admin.NewHandler(store, admin.HandlerOptions{})
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			defer srv.Close()
			defer h.Close()

			p := p
			p.t = t
			p.do(chromedp.Navigate(srv.URL+"/diagram"), chromedp.WaitVisible(chromedp.CSS(`svg.diagram`)))
			p.shot("diagram-" + tc.name)
			nodes, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.diagram g.node.state").length`))
			require.NoError(t, err)
			require.Equal(t, table.Len(), nodes)
			edges, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.diagram g.edge").length`))
			require.NoError(t, err)
			require.Equal(t, len(d.Table.Edges)+len(d.Table.Returns)+1, edges, "every move, and the initial arrow")
			through, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](edgesThroughStates))
			require.NoError(t, err)
			require.Empty(t, through, "arrows through states they do not join")
		})
	}
}

// edgesThroughStates walks every arrow of the diagram two pixels at a
// time and names each state box (inset by a pixel, where an arrow that
// joins it starts or ends) that a point of an arrow not joining it falls
// in. Boxes and arrows share the SVG's coordinates: Graphviz writes both
// into one group.
const edgesThroughStates = `(() => {
  const svg = document.querySelector("svg.diagram");
  const boxes = [...svg.querySelectorAll("g.node")].map(g => [g.id, g.getBBox()]);
  const bad = [];
  for (const g of svg.querySelectorAll("g.edge")) {
    const m = /^[er](\d+)-(\d+)$/.exec(g.id);
    const joins = m ? ["s" + m[1], "s" + m[2]] : ["initial", "s" + /^s?(\d+)$/.exec(svg.querySelector("g.edge#e-initial title").textContent.split("->")[1])[1]];
    const path = g.querySelector("path");
    const length = path.getTotalLength();
    for (let at = 0; at <= length; at += 2) {
      const p = path.getPointAtLength(at);
      for (const [id, b] of boxes) {
        if (joins.includes(id)) continue;
        if (p.x > b.x + 1 && p.x < b.x + b.width - 1 && p.y > b.y + 1 && p.y < b.y + b.height - 1) {
          bad.push(g.id + " through " + id);
        }
      }
    }
  }
  return [...new Set(bad)];
})()`

// thirtyStates is a table of 30 states: a queue, 24 stages run one after
// another (every fifth may go back three), a relocation any stage returns
// from, a stop, and three ends.
func thirtyStates(t *testing.T) *recovery.Roles[string] {
	t.Helper()
	stage := func(i int) string { return fmt.Sprintf("stage-%02d", i) }
	b := transition.New("queued").Allow("queued", stage(0), "cancelling", "cancelled")
	var running []string
	for i := range 24 {
		running = append(running, stage(i))
		next := "done"
		if i < 23 {
			next = stage(i + 1)
		}
		b.Allow(stage(i), next, "failed", "cancelling", "moving")
		if i%5 == 4 {
			b.Allow(stage(i), stage(i-3))
		}
	}
	b.Return("moving", running...).Allow("moving", "queued", "failed", "cancelling")
	table, err := b.Allow("cancelling", "cancelled", "failed", "done").Terminal("done", "failed", "cancelled").Build()
	require.NoError(t, err)
	require.Equal(t, 30, table.Len())
	roles, err := recovery.DefineRoles(table).NotStarted("queued").Running(running...).Relocating("moving", "queued").
		Stopping("cancelling", "cancelled").Failed("failed").Build()
	require.NoError(t, err)
	return roles
}

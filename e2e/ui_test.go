package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"

	"github.com/minictl/minictl/internal/minitest"
)

// The web view at /ui/, driven in headless Chromium the way a learner
// uses it: what it shows after each thing they do, and the buttons that
// do those things through the API.

const chromiumInstall = "apt-get install -y chromium"

// page is one browser tab on a cluster's /ui/.
type page struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go

	trace *pageTrace // the page load's trace, if MINICTL_UI_TRACE asks for one

	mu     sync.Mutex
	errors []string // uncaught exceptions and console errors
}

// openUI starts headless Chromium on url + "/ui/" and waits for the page
// to have listed nodes and pods. Without Chromium the test fails in CI and
// is skipped elsewhere, naming the package to install either way.
func openUI(t *testing.T, url string) *page {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the web view's tests need Chromium: %s", chromiumInstall)
		}
		t.Skipf("the web view's tests need Chromium: %s", chromiumInstall)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests run as root in CI, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1600, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, stopBrowser := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(stopBrowser)
	ctx, closeTab := chromedp.NewContext(actx)
	t.Cleanup(closeTab)

	p := &page{t: t, ctx: ctx, shots: os.Getenv("MINICTL_UI_SCREENSHOTS")}
	if p.shots == "" {
		p.shots = t.TempDir()
	}
	if err := os.MkdirAll(p.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", p.shots)
	listen := func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg = d.Exception.Description
			}
			p.fail(fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, cmp.Or(a.Description, string(a.Value)))
				}
				p.fail("console.error: " + strings.Join(args, " "))
			}
		}
	}
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.errors {
			t.Errorf("the page: %s", e)
		}
	})
	// chromedp turns on DevTools' network recording, which a learner's
	// browser does not run unless DevTools is open: it keeps a copy of
	// every answer in the page's process and decodes it on the main thread
	// (a trace shows 140 ms of the first render for the 3.7 MB list of
	// 2,000 pods). The page is measured as a learner's tab runs it.
	if _, err := chromedp.Call(ctx, network.Disable, cdp.Empty{}); err != nil {
		t.Fatalf("disable network recording: %v", err)
	}
	if path := os.Getenv("MINICTL_UI_TRACE"); path != "" {
		p.trace = startTrace(t, ctx, path)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/ui/")); err != nil {
		t.Fatalf("open %s/ui/: %v", url, err)
	}
	p.waitFor("the page to list nodes and pods", `document.body.dataset.ready === 'true'`)
	return p
}

func (p *page) fail(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errors = append(p.errors, s)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](p *page, expr string, opts ...chromedp.EvaluateOption) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the expression is true in the page; on failure it
// saves a screenshot and names it.
func (p *page) waitFor(what, expr string) {
	p.t.Helper()
	p.waitWithin(what, expr, 60*time.Second)
}

func (p *page) waitWithin(what, expr string, timeout time.Duration) bool {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			p.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the page did not show %s within %s (screenshot %s)", what, timeout, p.screenshot("failed"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// click clicks the first element the selector finds, as the page's own
// code would see a click: the element's click event, wherever it is on
// the screen as cards move about.
func (p *page) click(sel string) {
	p.t.Helper()
	js, _ := json.Marshal(sel)
	if !eval[bool](p, fmt.Sprintf(`(e => e ? (e.click(), true) : false)(document.querySelector(%s))`, js)) {
		p.t.Fatalf("click %s: no such element (screenshot %s)", sel, p.screenshot("failed"))
	}
}

// screenshot saves the whole window as name.png and returns its path.
func (p *page) screenshot(name string) string {
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(p.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
	}
	return path
}

// cards is the JavaScript for the page's live (not terminating) Running
// and Ready cards of the pods of app web.
const webCards = `[...document.querySelectorAll('.group[data-owner^="default/ReplicaSet/web-"] .pod[data-phase="Running"][data-ready="true"]:not(.terminating):not(.leave)')]`

// apiRunning counts the live Running and Ready pods of app in the API.
func apiRunning(t *testing.T, c *cluster, app string) int {
	code, list := c.do("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3D"+app, "", "")
	if code != http.StatusOK {
		t.Fatalf("list pods: %d %v", code, list)
	}
	n := 0
	for _, item := range list["items"].([]any) {
		pod := item.(map[string]any)
		if field(pod, "metadata", "deletionTimestamp") != nil || field(pod, "status", "phase") != "Running" {
			continue
		}
		conds, _ := field(pod, "status", "conditions").([]any)
		for _, c := range conds {
			if c := c.(map[string]any); c["type"] == "Ready" && c["status"] == "True" {
				n++
			}
		}
	}
	return n
}

// TestUI follows a learner through the web view: the nodes, a Deployment's
// pods appearing, a pod deleted from the page and replaced, the object
// panel, a node that stops its heartbeat, and a watch that falls behind a
// compaction and lists again.
func TestUI(t *testing.T) {
	// A small watch cache and a compaction every second: a watch that
	// resumes after a pause falls behind both and is told 410 Gone.
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast",
		"--etcd-compaction-interval", "1s", "--default-watch-cache-size", "100")
	c.WaitNodesReady(t, c.URL, 3, 60*time.Second)
	p := openUI(t, c.URL)

	// The nodes.
	p.waitFor("3 Ready nodes", `document.querySelectorAll('.node[data-ready="Ready"]').length === 3`)
	facts := eval[string](p, `document.querySelector('.node[data-node="node-1"] .node-facts').textContent`)
	if !strings.Contains(facts, "pod CIDR10.") || !strings.Contains(facts, "zone") {
		t.Errorf("node-1's column shows %q, want its pod CIDR and zone", facts)
	}

	// Pods that ran to completion: the page keeps pods as kubectl's table
	// rows, whose Completed condition names the phase, and whose STATUS
	// (Completed, Error) is the card's tooltip.
	for name, code := range map[string]string{"done": "0", "broke": "1"} {
		if code, out := c.do("POST", "/api/v1/namespaces/default/pods", "application/json", fmt.Sprintf(
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"annotations":{"sim.minictl.io/exit-code":%q}},
			  "spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}`, name, code)); code != http.StatusCreated {
			t.Fatalf("create pod %s: %d %v", name, code, out)
		}
	}
	p.waitFor("the pod that exited 0 Succeeded (Completed), the one that exited 1 Failed (Error), neither ready",
		`(([d, b]) => d?.dataset.phase === 'Succeeded' && /\nCompleted, not ready/.test(d.title) &&
		  b?.dataset.phase === 'Failed' && /\nError, not ready/.test(b.title))(
		  ['default/done', 'default/broke'].map(k => document.querySelector('.pod[data-key="' + k + '"]')))`)
	for name, phase := range map[string]string{"done": "Succeeded", "broke": "Failed"} {
		if code, pod := c.do("GET", "/api/v1/namespaces/default/pods/"+name, "", ""); code != http.StatusOK || field(pod, "status", "phase") != phase {
			t.Errorf("pod %s: %d, phase %v in the API, %s on the page", name, code, field(pod, "status", "phase"), phase)
		}
	}

	// A Deployment created through the API: its pods appear on the page
	// as Running cards no later than 2s after the API has them running.
	if code, out := c.do("POST", "/apis/apps/v1/namespaces/default/deployments", "application/json",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3,
		  "selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
		  "spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}`); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %v", code, out)
	}
	created := time.Now()
	eventually(t, "3 web pods Running and Ready in the API", func() (bool, string) {
		n := apiRunning(t, c, "web")
		return n == 3, fmt.Sprint(n)
	})
	inAPI := time.Now()
	p.waitWithin("3 Running web pod cards within 2s of the API", webCards+`.length === 3`, 2*time.Second)
	t.Logf("3 Running pod cards on the page %s after the create (the API had them after %s)",
		time.Since(created).Round(time.Millisecond), inAPI.Sub(created).Round(time.Millisecond))
	p.screenshot("deployment")

	// Delete a pod from its card's panel: the page shows the request, the
	// ReplicaSet's decision, and a new pod in its place.
	victim := eval[string](p, webCards+`[0].dataset.key`)
	p.click(`.pod[data-key="` + victim + `"]`)
	p.waitFor("the pod's panel", `document.querySelector('#object').dataset.key === '`+victim+`'`)
	p.waitFor("its owner chain Deployment → ReplicaSet → Pod",
		`/^Deployment default\/web→?\s*ReplicaSet default\/web-[a-z0-9]+→?\s*Pod default\/web-/.test([...document.querySelectorAll('#object-owners li')].map(l => l.textContent).join(''))`)
	p.waitFor("its YAML", `document.getElementById('object-yaml').textContent.includes('kind: Pod')`)
	p.waitFor("its conditions", `document.querySelector('#object-conditions tbody').textContent.includes('Ready')`)
	p.click(`#object-actions button[data-action="delete"]`)
	p.waitFor("the DELETE request it sent", `document.querySelector('#requests li code')?.textContent === 'DELETE /api/v1/namespaces/`+strings.Replace(victim, "/", "/pods/", 1)+`'`)
	p.waitFor("a replacement: 3 Running web cards, none of them the deleted pod",
		webCards+`.length === 3 && !`+webCards+`.some(e => e.dataset.key === '`+victim+`')`)
	p.waitFor("the ReplicaSet controller's decision", `[...document.querySelectorAll('#decisions li[data-component="replicaset"]')].some(l => /want 3, have 2 → create 1/.test(l.textContent))`)
	p.screenshot("self-healing")

	// A decision links to its object.
	p.click(`#decisions li[data-component="replicaset"] a.object`)
	p.waitFor("the ReplicaSet's panel, from the decision's link", `document.querySelector('#object').dataset.kind === 'ReplicaSet'`)

	// Make a pod not ready: the card turns, and its panel draws the path
	// the change took through the informers, in milliseconds.
	pod := eval[string](p, webCards+`[0].dataset.key`)
	p.click(`.pod[data-key="` + pod + `"]`)
	p.waitFor("the pod's panel", `document.querySelector('#object').dataset.key === '`+pod+`'`)
	p.click(`#object-actions button[data-action="ready"]`)
	p.waitFor("the pod's card not ready", `document.querySelector('.pod[data-key="`+pod+`"]').dataset.ready === 'false'`)
	p.waitFor("the path of the change: reflector, DeltaFIFO, indexer, handler, each with its milliseconds",
		`['reflector received', 'deltafifo queued', 'deltafifo popped', 'indexer updated', 'handler called'].every(s =>
		  document.querySelector('#object-path .sequence li[data-stage="' + s + '"] .delta')?.textContent.match(/^\+\d+\.\d ms$/))`)
	p.screenshot("object")
	p.click(`#object-actions button[data-action="ready"]`)
	p.waitFor("the pod's card ready again", `document.querySelector('.pod[data-key="`+pod+`"]').dataset.ready === 'true'`)

	// Stop the heartbeat of a node that runs web pods: it turns Unknown,
	// and its pods move to the other nodes.
	node := eval[string](p, `document.querySelector('.node:has(.group[data-owner^="default/ReplicaSet/web-"] .pod)').dataset.node`)
	p.click(`.node[data-node="` + node + `"] .node-name`)
	p.waitFor("the node's panel", `document.querySelector('#object').dataset.key === '`+node+`'`)
	p.click(`#object-actions button[data-action="heartbeat"]`)
	p.waitFor(node+" Unknown", `document.querySelector('.node[data-node="`+node+`"]').dataset.ready === 'Unknown'`)
	p.waitFor("3 Running web cards, none on "+node,
		webCards+`.length === 3 && !`+webCards+`.some(e => e.closest('.node')?.dataset.node === '`+node+`')`)
	p.screenshot("node-unknown")
	p.waitFor("the resume button", `document.querySelector('#object-actions button[data-action="heartbeat"]').textContent === 'resume heartbeat'`)
	p.click(`#object-actions button[data-action="heartbeat"]`)
	p.waitFor(node+" Ready again", `document.querySelector('.node[data-node="`+node+`"]').dataset.ready === 'Ready'`)

	// Pause the watches and churn the pods past the watch cache and a
	// compaction: resuming from the old resourceVersion is a 410 Gone, the
	// page lists again, and shows what the API has.
	before := eval[struct{ Lists, Gone int }](p, `({Lists: window.minictl.stats.lists, Gone: window.minictl.stats.gone})`)
	p.click(`#pause`)
	rv := eval[string](p, `window.minictl.informers[1].rv`)
	for _, n := range []int{30, 3} {
		if code, out := c.do("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale", "application/merge-patch+json",
			fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)); code != http.StatusOK {
			t.Fatalf("scale web to %d: %d %v", n, code, out)
		}
		eventually(t, fmt.Sprintf("%d web pods Running", n), func() (bool, string) {
			got := apiRunning(t, c, "web")
			return got == n, fmt.Sprint(got)
		})
	}
	eventually(t, "a watch from the paused resourceVersion to be told 410 Gone", func() (bool, string) {
		code, body := watchOnce(t, c, "/api/v1/pods?watch=true&timeoutSeconds=1&resourceVersion="+rv)
		return code == http.StatusGone || strings.Contains(body, `"code":410`), fmt.Sprint(code, " ", body)
	})
	p.click(`#pause`)
	p.waitFor("a relist after 410 Gone", fmt.Sprintf(`window.minictl.stats.gone > %d && window.minictl.stats.lists > %d`, before.Gone, before.Lists))
	eventually(t, "the page to show exactly the API's pods", func() (bool, string) {
		want := podKeys(t, c)
		got := eval[string](p, `JSON.stringify([...document.querySelectorAll('.pod:not(.leave)')].map(e => e.dataset.key).sort())`)
		return got == want, "page " + got + "\napi  " + want
	})
	p.screenshot("relisted")
}

// watchOnce sends one watch request and returns its code and all it read.
func watchOnce(t *testing.T, c *cluster, path string) (int, string) {
	resp, err := http.Get(c.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// podKeys is the sorted namespace/name of every pod in the API, as JSON.
func podKeys(t *testing.T, c *cluster) string {
	code, list := c.do("GET", "/api/v1/pods", "", "")
	if code != http.StatusOK {
		t.Fatalf("list pods: %d", code)
	}
	var keys []string
	for _, item := range list["items"].([]any) {
		m := item.(map[string]any)
		keys = append(keys, fmt.Sprintf("%v/%v", field(m, "metadata", "namespace"), field(m, "metadata", "name")))
	}
	slices.Sort(keys)
	b, _ := json.Marshal(keys)
	return string(b)
}

// TestUIPerformance measures the page on a cluster of 20 nodes and 2,000
// pods: its first render, and the main-thread time of each watch event it
// applies. The numbers are reported, not asserted: they depend on the
// machine. It takes minutes, so it runs only with MINICTL_UI_PERF=1.
// MINICTL_UI_TRACE=trace.json also saves a trace of the page load.
func TestUIPerformance(t *testing.T) {
	if os.Getenv("MINICTL_UI_PERF") != "1" {
		t.Skip("set MINICTL_UI_PERF=1 to measure the web view with 2,000 pods")
	}
	const nodes, pods = 20, 2000
	c := up(t, minitest.FreeAddr(t), t.TempDir(), "--fast", "--nodes", fmt.Sprint(nodes))
	c.WaitNodesReady(t, c.URL, nodes, 2*time.Minute)

	// The pods go straight to their nodes: this measures the page, not
	// the scheduler.
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"load-%04d","labels":{"app":"load"}},
				  "spec":{"nodeName":"node-%d","containers":[{"name":"c","image":"busybox"}]}}`, i, i%nodes+1)
				for try := 0; ; try++ {
					code, out := c.do("POST", "/api/v1/namespaces/default/pods", "application/json", body)
					if code == http.StatusCreated || code == http.StatusConflict && try > 0 {
						break
					}
					if (code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable) || try == 10 {
						t.Errorf("create pod %d: %d %v", i, code, out)
						break
					}
					time.Sleep(time.Second)
				}
			}
		})
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	eventually(t, fmt.Sprintf("%d pods Running", pods), func() (bool, string) {
		n := apiRunning(t, c, "load")
		if n < pods {
			time.Sleep(2 * time.Second)
		}
		return n == pods, fmt.Sprint(n)
	})

	p := openUI(t, c.URL)
	p.waitFor(fmt.Sprintf("%d pod cards", pods), fmt.Sprintf(`document.querySelectorAll('.pod').length === %d`, pods))
	first := eval[struct{ FirstRender, Painted, PodsListed, PodsDrawn float64 }](p, `({
	  FirstRender: performance.getEntriesByName('ui:first-render')[0].startTime,
	  Painted: performance.getEntriesByName('ui:first-render-painted')[0]?.startTime ?? -1,
	  PodsListed: performance.getEntriesByName('ui:pods-parsed')[0].startTime - performance.getEntriesByName('ui:lists-sent')[0].startTime,
	  PodsDrawn: window.minictl.stats.replaced.pods})`)
	if p.trace != nil {
		p.trace.save(t, p.ctx)
	}
	t.Logf("first render %.0f ms after navigation start, laid out and painted at %.0f ms; of it, listing the %d pods (sent to parsed) took %.0f ms, drawing them %.0f ms",
		first.FirstRender, first.Painted, pods, first.PodsListed, first.PodsDrawn)
	// Each list request as the browser's Resource Timing saw it: when it
	// was sent, how long until the first byte and the last, and its size.
	lists := eval[[]struct {
		Name                   string
		Start, FirstByte, Last float64
		Size                   float64
	}](p, `performance.getEntriesByType('resource').filter(e => /\/(pods|nodes)\?/.test(e.name) && !/watch=/.test(e.name)).map(e => ({
	  Name: e.name.replace(/^https?:\/\/[^/]+/, ''), Start: e.startTime, FirstByte: e.responseStart - e.startTime,
	  Last: e.responseEnd - e.startTime, Size: e.encodedBodySize}))`)
	for _, l := range lists {
		t.Logf("  %s: sent at %.0f ms, first byte after %.0f ms, last after %.0f ms, %.0f KB", l.Name, l.Start, l.FirstByte, l.Last, l.Size/1024)
	}
	// What came before the lists were sent: the page, its style sheet and
	// modules (when each arrived), and when the modules could run.
	page := eval[struct {
		HTML, Interactive, ListsJS, Modules float64
		Files                               []struct {
			Name       string
			Start, End float64
		}
	}](p, `({HTML: performance.getEntriesByType('navigation')[0].responseEnd,
	  Interactive: performance.getEntriesByType('navigation')[0].domInteractive,
	  ListsJS: performance.getEntriesByName('ui:lists-sent')[0]?.startTime ?? -1,
	  Modules: performance.getEntriesByName('ui:modules-run')[0]?.startTime ?? -1,
	  Files: performance.getEntriesByType('resource').filter(e => /\.(js|css)$/.test(e.name)).map(e => ({
	    Name: e.name.replace(/^.*\//, ''), Start: e.startTime, End: e.responseEnd}))})`)
	files := ""
	for _, f := range page.Files {
		files += fmt.Sprintf(" %s %.0f–%.0f", f.Name, f.Start, f.End)
	}
	t.Logf("  before them: the page arrived at %.0f ms, was parsed at %.0f ms; the lists were sent at %.0f ms, the modules at %.0f ms; its files (sent–arrived, ms):%s",
		page.HTML, page.Interactive, page.ListsJS, page.Modules, files)
	// The pods list in the page, step by step (api.js and app.js mark
	// each), and the long tasks (> 50 ms) of the main thread until then:
	// what kept it from drawing.
	steps := eval[map[string]float64](p, `Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name.replace(/^ui:/, ''), m.startTime]))`)
	t.Logf("  the pods in the page (ms): answer arrived %.0f, its body read %.0f, parsed %.0f, made rows %.0f; drawing began %.0f, ended %.0f, painted %.0f",
		steps["pods-response"], steps["pods-text"], steps["pods-parsed"], steps["pods-rows"], steps["pods-draw"], steps["first-render"], steps["first-render-painted"])
	tasks := eval[[]string](p, `new Promise(done => {
	  new PerformanceObserver((l, o) => { o.disconnect(); done(l.getEntries().map(e => e.startTime.toFixed(0) + '+' + e.duration.toFixed(0))); })
	    .observe({type: 'longtask', buffered: true});
	  setTimeout(() => done([]), 200);
	})`, chromedp.EvalAwaitPromise)
	t.Logf("  long tasks (start+duration, ms) until then: %v", tasks)
	p.screenshot("2000-pods")

	// Watch events: a label on every pod, and the page applies each.
	eval[bool](p, `(window.longTasks = [], new PerformanceObserver(l => window.longTasks.push(...l.getEntries().map(e => e.duration))).observe({type: 'longtask'}), true)`)
	before := eval[int](p, `window.minictl.stats.applied.length`)
	work = make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				// A cluster this size on a small machine may shed load
				// (429, 503): try again, as a client should.
				path := fmt.Sprintf("/api/v1/namespaces/default/pods/load-%04d", i)
				for try := 0; ; try++ {
					code, out := c.do("PATCH", path, "application/merge-patch+json", `{"metadata":{"labels":{"touched":"yes"}}}`)
					if code == http.StatusOK {
						break
					}
					if (code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable) || try == 10 {
						t.Errorf("patch %s: %d %v", path, code, out)
						break
					}
					time.Sleep(time.Second)
				}
			}
		})
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	p.waitFor("every patch applied", fmt.Sprintf(`window.minictl.stats.applied.length >= %d`, before+pods))
	ms := eval[[]float64](p, fmt.Sprintf(`window.minictl.stats.applied.slice(%d)`, before))
	long := eval[[]float64](p, `window.longTasks`)
	slices.Sort(ms)
	pct := func(q float64) float64 { return ms[int(q*float64(len(ms)-1))] }
	t.Logf("%d watch events applied: median %.3f ms, p99 %.3f ms, max %.3f ms of main-thread time each; %d long tasks (> 50 ms) meanwhile %v",
		len(ms), pct(0.5), pct(0.99), ms[len(ms)-1], len(long), long)
}

// The page load traced, for finding where its first render goes:
// MINICTL_UI_TRACE=trace.json names the file. The trace is Chrome's
// (JSON trace events: each main-thread task, style, layout, paint, script
// and garbage collection), the one DevTools' Performance panel records;
// DevTools and ui.perfetto.dev open it.
type pageTrace struct {
	path     string
	mu       sync.Mutex
	events   []any
	complete chan struct{}
}

// traceCategories are DevTools' Performance panel's, with the user timing
// marks the page sets.
var traceCategories = []string{"devtools.timeline", "disabled-by-default-devtools.timeline", "toplevel",
	"blink", "blink.user_timing", "loading", "v8", "v8.execute", "disabled-by-default-v8.gc"}

// startTrace starts tracing the tab of ctx; it must run before the page
// loads.
func startTrace(t *testing.T, ctx context.Context, path string) *pageTrace {
	tr := &pageTrace{path: path, complete: make(chan struct{})}
	var once sync.Once
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *tracing.EventDataCollected:
			tr.mu.Lock()
			for _, v := range ev.Value {
				tr.events = append(tr.events, v)
			}
			tr.mu.Unlock()
		case *tracing.EventTracingComplete:
			once.Do(func() { close(tr.complete) })
		}
	})
	if err == nil {
		_, err = chromedp.Call(ctx, tracing.Start, tracing.StartParams{TraceConfig: &tracing.TraceConfig{IncludedCategories: traceCategories}})
	}
	if err != nil {
		t.Fatalf("trace the page: %v", err)
	}
	return tr
}

// save ends the trace and writes it to its file.
func (tr *pageTrace) save(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, tracing.End, cdp.Empty{}); err != nil {
		t.Fatalf("end the trace: %v", err)
	}
	select {
	case <-tr.complete:
	case <-time.After(30 * time.Second):
		t.Fatalf("the browser did not finish the trace within 30s")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	b, err := json.Marshal(map[string]any{"traceEvents": tr.events})
	if err == nil {
		err = os.WriteFile(tr.path, b, 0o644)
	}
	if err != nil {
		t.Fatalf("write the trace: %v", err)
	}
	t.Logf("the page load's trace: %s (%d events)", tr.path, len(tr.events))
}

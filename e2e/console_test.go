package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The operator console, driven in headless Chromium as an operator would
// use it, against the built binary: sign in, find a parked event by its
// Checkout Session id, read why it was parked and every attempt of its
// steps, replay it, see it done; resolve an event no replay can fix; then
// the same pages at a phone's width (400 px), none wider than the screen,
// and the actions reachable from the keyboard.
//
// Chromium is Debian's package (scripts/ensure-chromium.sh installs it when
// it is missing and it may); no browser is downloaded by a tool of its own.
// With CONSOLE_SCREENSHOTS=1 the test writes the screenshots of
// docs/console.md into docs/ (console-overview.png, console-parked.png, console-event.png,
// console-replayed.png, console-resolve.png, console-phone.png).

const consoleScreenshotsEnv = "CONSOLE_SCREENSHOTS"

// consoleToken is the console's ADMIN_TOKEN in these tests.
const consoleToken = "e2e-console-token-6b1f0c2d9a"

func TestConsoleInBrowser(t *testing.T) {
	chrome := consoleChromium(t)
	w := newWorld(t)
	// Not 127.0.0.1:0: configuration refuses an ADMIN_ADDR equal to
	// HTTP_ADDR as written, port 0 included.
	// Three attempts a step: the parked event below is the fulfillment
	// API down for its three (the delivery's, then the redriver's).
	p := startReceiver(t, "console", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken, "MAX_STEP_ATTEMPTS", "3"))
	admin := consoleAdminURL(t, p)

	// A short history: paid checkouts, an invoice, a marketplace purchase,
	// a forged delivery (refused), a checkout whose fulfillment call the
	// API answers 503 three times (the delivery's attempt, then two of the
	// redriver's), which parks that step, and one the API refuses for good
	// (422): an order it will never know.
	for n := range 4 {
		mustPost(t, p.URL, checkout(n, "con"), http.StatusOK)
	}
	mustPost(t, p.URL, invoiceEvent(1, "con", "invoice.created"), http.StatusOK)
	mustPost(t, p.URL, invoiceEvent(1, "con", "invoice.paid"), http.StatusOK)
	mustPost(t, p.URL, purchase(1, "con"), http.StatusOK)
	forged := checkout(99, "con")
	if res, err := postRaw(context.Background(), p.URL+forged.Path,
		stripeHeader(forged.Body, "whsec_not_the_secret", time.Now()), forged.Body); err != nil || res.Status != http.StatusBadRequest {
		t.Fatalf("forged delivery: %v %+v", err, res)
	}
	w.API.SetStatus(http.StatusServiceUnavailable)
	parked := checkout(7, "con")
	mustPost(t, p.URL, parked, http.StatusBadGateway)
	waitFor(t, 30*time.Second, "the redriver to park the failing step", func() bool {
		st, _ := w.stepState(t, parked.StepKey(stepFulfillment))
		return st == "parked"
	})
	w.API.SetStatus(http.StatusUnprocessableEntity)
	unknown := checkout(8, "con")
	mustPost(t, p.URL, unknown, http.StatusOK)
	w.API.SetStatus(0)
	if st, _ := w.stepState(t, unknown.StepKey(stepFulfillment)); st != "parked" {
		t.Fatalf("the refused fulfillment step is %q, want parked", st)
	}
	session := checkoutSession(7, "con")

	ctx, messages := consoleBrowser(t, chrome)
	shots := consoleShots(t)
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// present waits until the page the browser shows has an element
	// matching sel: a click that navigates returns before the next page is
	// there, and a query of the DOM during the navigation may fail.
	present := func(sel string) {
		t.Helper()
		js := fmt.Sprintf(`document.readyState === "complete" && document.querySelector(%q) !== null`, sel)
		waitFor(t, 30*time.Second, "the page to show "+sel, func() bool {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
			return err == nil && ok
		})
	}
	text := func(sel string) string {
		t.Helper()
		present(sel)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	click := func(sel, then string) {
		t.Helper()
		present(sel)
		run("click "+sel, chromedp.Click(chromedp.CSS(sel)))
		present(then)
	}

	// Sign in: the console answers a stranger with its sign-in form.
	run("open the console", chromedp.Navigate(admin+"/"))
	present("#token")
	run("type the token", chromedp.SendKeys(chromedp.CSS("#token"), consoleToken))
	click("#signin", "#parked")
	if got := text("#parked .big"); got != "2" {
		t.Errorf("the overview counts %q parked events, want 2", got)
	}
	if got := text("#legend-parked .count"); got != "2" {
		t.Errorf("the overview's chart counts %q parked events, want 2: the card's", got)
	}
	shots.take(ctx, "overview")
	t.Log("signed in; the overview shows 2 parked events, in its card and its chart")

	// The events waiting for an operator.
	run("list parked events", chromedp.Navigate(admin+"/events?state=parked"))
	present(`#events a[href="/events/` + parked.Key + `"]`)
	shots.take(ctx, "parked")

	// Find the event by its Checkout Session id, from the search box.
	run("back to the overview", chromedp.Navigate(admin+"/"))
	present(`header input[name="q"]`)
	run("search by Checkout Session id", chromedp.SendKeys(chromedp.CSS(`header input[name="q"]`), session))
	click(`header form.search button`, `#events a[href="/events/`+parked.Key+`"]`)
	if rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#events tbody tr").length`)); err != nil || rows != 1 {
		t.Errorf("the search for %s lists %d events (%v), want 1", session, rows, err)
	}
	t.Logf("found %s by %s", parked.Key, session)

	// Read why it was parked, and every attempt.
	click(`#events a[href="/events/`+parked.Key+`"]`, "#why-fulfillment")
	why := text("#why-fulfillment pre")
	if !strings.Contains(why, "503") {
		t.Errorf("the event page says it was parked because %q; want the API's 503", why)
	}
	if got := text("#state"); got != "parked" {
		t.Errorf("the event page shows state %q, want parked", got)
	}
	attempts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(
		"#attempts-fulfillment tbody tr")).map(r => Array.from(r.cells).slice(0, 5).map(c => c.textContent.trim())
		.filter((_, i) => i !== 1 && i !== 2).join(" "))`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 failed 503", "2 failed 503", "3 parked 503"}; !slices.Equal(attempts, want) {
		t.Errorf("the event page's attempts of the fulfillment step %q, want %q", attempts, want)
	}
	shots.take(ctx, "event")
	t.Logf("why it was parked: %s; its attempts: %q", why, attempts)

	// The actions are reachable from the keyboard, and show where focus is.
	var focused string
	for range 60 {
		run("press Tab", chromedp.KeyEvent("\t"))
		if focused, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`)); focused == "replay" {
			break
		}
	}
	if focused != "replay" {
		t.Errorf("Tab never reached the Replay action")
	} else if outline, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
		`getComputedStyle(document.activeElement).outlineStyle`)); outline == "none" || outline == "" {
		t.Errorf("the focused Replay action shows no focus (outline %q)", outline)
	}

	// Replay it: a preview, then the action and its result.
	click("#replay", "#do-replay")
	if plan := text("#plan"); !strings.Contains(plan, "Give back step fulfillment") {
		t.Errorf("the preview says %q; want it to give back the fulfillment step", plan)
	}
	click("#do-replay", "#state-after")
	if got := text("#outcome"); got != "processed" {
		t.Errorf("the replay's outcome is %q, want processed", got)
	}
	if got := text("#state-after"); got != "done" {
		t.Errorf("after the replay the event is %q, want done", got)
	}
	shots.take(ctx, "replayed")

	// See it done.
	click("#back", "#timeline")
	if got := text("#state"); got != "done" {
		t.Errorf("the event page shows %q after the replay, want done", got)
	}
	if st, attempts := w.stepState(t, parked.StepKey(stepFulfillment)); st != "done" || attempts != 1 {
		t.Errorf("the fulfillment step is %s after %d attempts; want done after 1 (attempts reset by the replay)", st, attempts)
	}
	if n := w.API.CountByKey(idemKey(parked.Ref(stepFulfillment))); n != 4 {
		t.Errorf("the fulfillment API saw the step's Idempotency-Key %d times, want 4 (503 three times, then replayed)", n)
	}
	if got := text("#attempts-fulfillment tbody tr:last-child .badge"); got != "done" {
		t.Errorf("the replay's attempt is %q on the event page, want done", got)
	}
	t.Log("replayed: the event is done")

	// Resolve the order the API will never know: preview, a reason, done.
	run("open the unknown order's event", chromedp.Navigate(admin+"/events/"+unknown.Key))
	click("#resolve", "#reason")
	if plan := text("#plan"); !strings.Contains(plan, "Close step fulfillment") {
		t.Errorf("the resolve preview says %q; want it to close the fulfillment step", plan)
	}
	run("type the reason", chromedp.SendKeys(chromedp.CSS("#reason"), "refunded by hand in the dashboard; never to ship"))
	shots.take(ctx, "resolve")
	click("#do-resolve", "#state-after")
	if got := text("#state-after"); got != "resolved" {
		t.Errorf("after resolving, the event is %q, want resolved", got)
	}
	click("#back", "#resolution")
	if got := text("#resolution-reason"); got != "refunded by hand in the dashboard; never to ship" {
		t.Errorf("the event page keeps the reason %q", got)
	}
	run("back to the overview", chromedp.Navigate(admin+"/"))
	if got := text("#parked .big"); got != "0" {
		t.Errorf("after the replay and the resolve, the overview counts %q parked events, want 0", got)
	}
	if !p.out.contains(`"operator resolved a parked event"`) {
		t.Error("the resolve is not logged with who did it")
	}
	t.Log("resolved: nothing is parked")

	// A phone's width: no page is wider than the screen (wide tables
	// scroll in their own box).
	run("a phone's screen", chromedp.EmulateViewport(400, 860))
	for _, path := range []string{"/", "/events", "/events?state=resolved", "/events/" + parked.Key, "/events/" + unknown.Key,
		"/events/" + unknown.Key + "/resolve", "/events/" + parked.Key + "/replay", "/replay-parked"} {
		run("open "+path, chromedp.Navigate(admin+path))
		present("main h1")
		widths, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](
			`[document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]`))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if widths[0] > widths[2] || widths[1] > widths[2] {
			t.Errorf("at 400 px, %s is %d px wide (body %d) for a %d px viewport: it scrolls sideways", path, widths[0], widths[1], widths[2])
		}
		if path == "/events/"+parked.Key {
			shots.take(ctx, "phone")
		}
	}
	t.Log("at 400 px, no page is wider than the screen")

	if bad := messages.problems(); len(bad) > 0 {
		t.Errorf("the browser reported (a Content-Security-Policy violation, an exception):\n  %s", strings.Join(bad, "\n  "))
	}
	if !p.out.contains(`"operator replay"`) || !p.out.contains(`"actor":"console `) {
		t.Error("the replay is not logged with who did it")
	}
	if code := p.Term(t, 30*time.Second); code != 0 {
		t.Errorf("the receiver exited %d after SIGTERM", code)
	}
}

// consoleAdminURL is the console's address, from the receiver's log line
// "admin listening".
func consoleAdminURL(t *testing.T, p *proc) string {
	t.Helper()
	p.waitLog(t, `"admin listening"`, 10*time.Second)
	lines, _ := p.out.snapshot()
	for _, l := range lines {
		if !strings.Contains(l, `"admin listening"`) {
			continue
		}
		var v struct{ Addr string }
		if json.Unmarshal([]byte(l), &v) == nil && v.Addr != "" {
			return "http://" + v.Addr
		}
	}
	t.Fatal("no address in the admin listening line")
	return ""
}

// consoleChromium returns the Chromium to drive, installing Debian's
// package when it is missing and this machine allows it. Where it cannot
// be installed, the test is skipped with the reason, except on CI, where
// it must run.
func consoleChromium(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(filepath.Dir(file)), "scripts", "ensure-chromium.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	path := strings.TrimSpace(lines[len(lines)-1])
	if err == nil && path != "" {
		return path
	}
	msg := fmt.Sprintf("no Chromium for the console's browser test (%v):\n%s", err, stderr.String())
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// consoleBrowser starts a headless Chromium with a fresh profile, and
// collects what the pages write to its console.
func consoleBrowser(t *testing.T, chrome string) (context.Context, *consoleMessages) {
	t.Helper()
	var out bytes.Buffer
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these, the browser's own connections are refused on
		// machines without a network, and it stalls on them.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(&out),
	)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		if t.Failed() && out.Len() > 0 {
			t.Logf("chromium output:\n%s", out.String())
		}
	})
	m := &consoleMessages{}
	msgs := chromedp.Console(ctx)
	go func() {
		for msg, err := range msgs {
			if err != nil {
				return
			}
			m.add(msg)
		}
	}()
	return ctx, m
}

// consoleMessages are what the pages wrote to the browser's console.
type consoleMessages struct {
	mu   sync.Mutex
	list []chromedp.ConsoleMessage
}

func (m *consoleMessages) add(msg chromedp.ConsoleMessage) {
	m.mu.Lock()
	m.list = append(m.list, msg)
	m.mu.Unlock()
}

// problems are the errors, warnings and exceptions among them.
func (m *consoleMessages) problems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, msg := range m.list {
		if strings.Contains(msg.Text, "status of 401") {
			continue // the sign-in page is answered 401, by design
		}
		if msg.IsException() || msg.Type == "error" || msg.Type == "warning" ||
			strings.Contains(msg.Text, "Content Security Policy") {
			out = append(out, fmt.Sprintf("%s %s (%s:%d)", msg.Type, msg.Text, msg.URL, msg.Line+1))
		}
	}
	return out
}

// screenshots of the pages, into docs/ when CONSOLE_SCREENSHOTS asks for
// them, else into the test's temporary directory.
type consoleScreens struct {
	t   *testing.T
	dir string
}

func consoleShots(t *testing.T) consoleScreens {
	dir := t.TempDir()
	if v := os.Getenv(consoleScreenshotsEnv); v != "" && v != "0" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(filepath.Dir(file)), "docs")
	}
	return consoleScreens{t: t, dir: dir}
}

func (s consoleScreens) take(ctx context.Context, name string) {
	s.t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(s.dir, "console-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	s.t.Logf("screenshot %s (%d KB)", path, len(png)>>10)
}

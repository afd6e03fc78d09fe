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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The operator console, driven in headless Chromium as an operator would
// use it, against the built binary: sign in, find a parked event by its
// Checkout Session id, read why it was parked, replay it, see it done.
//
// Chromium is Debian's package (scripts/ensure-chromium.sh installs it when
// it is missing and it may); no browser is downloaded by a tool of its own.
// With CONSOLE_SCREENSHOTS=1 the test writes the screenshots of the README
// into docs/ (console-overview.png, console-parked.png, console-event.png,
// console-replayed.png).

const consoleScreenshotsEnv = "CONSOLE_SCREENSHOTS"

// consoleToken is the console's ADMIN_TOKEN in these tests.
const consoleToken = "e2e-console-token-6b1f0c2d9a"

func TestConsoleInBrowser(t *testing.T) {
	chrome := consoleChromium(t)
	w := newWorld(t)
	// Not 127.0.0.1:0: configuration refuses an ADMIN_ADDR equal to
	// HTTP_ADDR as written, port 0 included.
	p := startReceiver(t, "console", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken))
	admin := consoleAdminURL(t, p)

	// A short history: paid checkouts, an invoice, a marketplace purchase,
	// a forged delivery (refused), and a checkout whose fulfillment call the
	// API refuses for good (422), which parks that step.
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
	w.API.SetStatus(422)
	parked := checkout(7, "con")
	mustPost(t, p.URL, parked, http.StatusOK)
	w.API.SetStatus(0)
	if st, _ := w.stepState(t, parked.StepKey(stepFulfillment)); st != "parked" {
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
	if got := text("#parked .big"); got != "1" {
		t.Errorf("the overview counts %q parked events, want 1", got)
	}
	shots.take(ctx, "overview")
	t.Log("signed in; the overview shows 1 parked event")

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

	// Read why it was parked.
	click(`#events a[href="/events/`+parked.Key+`"]`, "#why-fulfillment")
	why := text("#why-fulfillment pre")
	if !strings.Contains(why, "422") {
		t.Errorf("the event page says it was parked because %q; want the API's 422", why)
	}
	if got := text("#state"); got != "parked" {
		t.Errorf("the event page shows state %q, want parked", got)
	}
	shots.take(ctx, "event")
	t.Logf("why it was parked: %s", why)

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
	if n := w.API.CountByKey(idemKey(parked.StepKey(stepFulfillment))); n != 2 {
		t.Errorf("the fulfillment API saw the step's Idempotency-Key %d times, want 2 (refused, then replayed)", n)
	}
	t.Log("replayed: the event is done")

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

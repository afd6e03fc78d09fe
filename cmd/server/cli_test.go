package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/version"
)

// cli runs the program with args in an environment of env alone.
func cli(env map[string]string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, getenv(env), &out, &errOut)
	return out.String(), errOut.String(), err
}

// commands is every command and subcommand of the binary.
func commands() [][]string {
	cmds := [][]string{
		{}, {"serve"},
		{"migrate"}, {"migrate", "up"}, {"migrate", "down"}, {"migrate", "version"},
		{"events"}, {"events", "list"}, {"events", "show"}, {"events", "replay"}, {"events", "prune"},
		{"reconcile"},
		{"healthcheck"}, {"version"},
	}
	for _, r := range providers.Reconcilers() {
		cmds = append(cmds, []string{"reconcile", r.Name})
	}
	return cmds
}

// TestHelpNeedsNoConfiguration: --help and -h of every command print its
// usage to stdout and exit 0 with no configuration at all (no
// DATABASE_URL), and `server help CMD` is CMD --help.
func TestHelpNeedsNoConfiguration(t *testing.T) {
	for _, cmd := range commands() {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string{}, cmd...), flag)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				out, errOut, err := cli(nil, args...)
				if err != nil || exitCode(err) != exitOK {
					t.Fatalf("exit %d: %v\n%s", exitCode(err), err, errOut)
				}
				if !strings.HasPrefix(out, "usage:\n") || errOut != "" {
					t.Fatalf("stdout %q, stderr %q; want the usage on stdout alone", out, errOut)
				}
				if len(cmd) > 0 && cmd[0] != "serve" && !strings.Contains(out, "server "+strings.Join(cmd, " ")) {
					t.Errorf("the usage does not name %q:\n%s", strings.Join(cmd, " "), out)
				}
			})
		}
		if len(cmd) > 0 {
			viaHelp, _, err := cli(nil, append([]string{"help"}, cmd...)...)
			direct, _, _ := cli(nil, append(append([]string{}, cmd...), "--help")...)
			if err != nil || viaHelp != direct {
				t.Errorf("server help %s: %v, %q; want %q", strings.Join(cmd, " "), err, viaHelp, direct)
			}
		}
	}
	// A flag after the positional arguments asks for help too.
	if out, _, err := cli(nil, "events", "show", "evt_1", "--help"); err != nil || !strings.Contains(out, "server events show KEY") {
		t.Errorf("events show KEY --help: %v %q", err, out)
	}
}

// TestUsageErrors: every command line the binary does not understand says
// what is wrong, then the command's usage, on stderr, and exits 2, before
// any configuration is read or any database opened.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args  []string
		want  string // what is wrong
		usage string // the usage it is followed by
	}{
		{[]string{"frobnicate"}, `server: unknown command "frobnicate"`, "server events COMMAND"},
		{[]string{"evnets", "list"}, `server: unknown command "evnets"; did you mean "events"?`, "server events COMMAND"},
		{[]string{"reconcil", "stripe"}, `server: unknown command "reconcil"; did you mean "reconcile"?`, "server events COMMAND"},
		{[]string{"recon"}, `server: unknown command "recon"; did you mean "reconcile"?`, "server events COMMAND"},
		{[]string{"events", "replya"}, `server events: unknown command "replya"; did you mean "replay"?`, "server events prune"},
		{[]string{"events", "Show"}, `server events: unknown command "Show"; did you mean "show"?`, "server events prune"},
		{[]string{"migrate", "dwon", "1"}, `server migrate: unknown command "dwon"; did you mean "down"?`, "server migrate down N"},
		{[]string{"reconcile", "strip"}, `server reconcile: unknown reconciliation "strip"; did you mean "stripe"?`, "server reconcile stripe"},
		{[]string{"reconcile", "github"}, `server reconcile: unknown reconciliation "github"; did you mean "github-marketplace"?`, "server reconcile stripe"},
		{[]string{"serve", "now"}, "server serve: takes no arguments", "server [serve]"},
		{[]string{"events"}, "server events: a command is needed", "server events list"},
		{[]string{"events", "frob"}, `server events: unknown command "frob"`, "server events prune"},
		{[]string{"events", "list", "--status", "parkd"}, `--status must be one of done, resolved, in_progress, failed, parked, got "parkd"`, "server events list"},
		{[]string{"events", "list", "--state", "parkd"}, `--state must be one of done, resolved, in_progress, failed, parked, got "parkd"`, "server events list"},
		{[]string{"events", "list", "--source", "strip"}, `--source must be one of ` + strings.Join(providers.Sources(providers.All()), ", ") + `, got "strip"`, "server events list"},
		{[]string{"events", "list", "--limit", "many"}, `invalid value "many" for flag -limit`, "server events list"},
		{[]string{"events", "list", "--limit", "0"}, "--limit must be positive", "server events list"},
		{[]string{"events", "list", "--nope"}, "flag provided but not defined: -nope", "server events list"},
		{[]string{"events", "list", "extra"}, `server events list: takes no arguments, got ["extra"]`, "server events list"},
		{[]string{"events", "show"}, "server events show: needs one KEY, got 0", "server events show KEY"},
		{[]string{"events", "show", "a", "b"}, "server events show: needs one KEY, got 2", "server events show KEY"},
		{[]string{"events", "replay"}, "server events replay: needs KEYs, or --parked --since DURATION", "server events replay"},
		{[]string{"events", "replay", "--parked"}, "--parked needs --since DURATION", "server events replay"},
		{[]string{"events", "replay", "--parked", "--since", "1h", "evt_x"}, "takes KEYs or --parked, not both", "server events replay"},
		{[]string{"events", "prune"}, "server events prune: needs --older-than DURATION", "server events prune"},
		{[]string{"events", "prune", "--older-than", "-1h"}, "--older-than -1h0m0s is negative", "server events prune"},
		{[]string{"events", "prune", "--older-than", "1s"}, "--older-than 1s is shorter than the floor", "server events prune"},
		{[]string{"events", "prune", "--older-than", "720h", "--batch", "0"}, "--batch must be positive", "server events prune"},
		{[]string{"migrate"}, "server migrate: a command is needed", "server migrate up"},
		{[]string{"migrate", "sideways"}, `server migrate: unknown command "sideways"`, "server migrate down N"},
		{[]string{"migrate", "down"}, "server migrate down: needs N", "server migrate down N"},
		{[]string{"migrate", "down", "x"}, `server migrate down: N must be a positive number, got "x"`, "server migrate down N"},
		{[]string{"migrate", "up", "3"}, "server migrate up: takes no arguments", "server migrate up"},
		{[]string{"reconcile"}, "server reconcile: a command is needed", "server reconcile stripe"},
		{[]string{"reconcile", "nope"}, `server reconcile: unknown reconciliation "nope"`, "server reconcile stripe"},
		{[]string{"reconcile", "stripe", "--since", "1h", "--resume"}, "--since and --resume cannot be used together", "server reconcile stripe"},
		{[]string{"reconcile", "stripe", "--since", "-1h"}, "--since must be positive", "server reconcile stripe"},
		{[]string{"reconcile", "github-marketplace", "--since", "1h"}, "flag provided but not defined: -since", "server reconcile github-marketplace"},
		{[]string{"healthcheck", "--url", "ftp://example.com/"}, "--url must be an absolute http or https URL", "server healthcheck"},
		{[]string{"healthcheck", "--timeout", "0s"}, "--timeout must be positive", "server healthcheck"},
		{[]string{"version", "now"}, "server version: takes no arguments", "server version"},
		{[]string{"--version", "--short"}, "flag provided but not defined: -short", "server version"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, errOut, err := cli(nil, c.args...)
			if exitCode(err) != exitUsage {
				t.Fatalf("exit %d (%v), want 2", exitCode(err), err)
			}
			msg, usage, ok := strings.Cut(errOut, "\n\nusage:\n")
			if !ok || !strings.Contains(msg, c.want) || !strings.Contains(usage, c.usage) {
				t.Errorf("stderr %q; want %q, then the usage of %q", errOut, c.want, c.usage)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// TestVersion: a binary built with the Makefile's -ldflags prints the
// version it was stamped with (server version, --version, --json); the
// Makefile and the Dockerfile stamp the same variable.
func TestVersion(t *testing.T) {
	const variable = "github.com/paywebhooks/receiver/internal/version.Version"
	for _, f := range []string{"../../Makefile", "../../Dockerfile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("-X "+variable+"=")) {
			t.Errorf("%s does not stamp %s", f, variable)
		}
	}

	// In-process: whatever this test binary is, its version is printed.
	out, _, err := cli(nil, "version")
	if want := "paywebhooks receiver " + version.Get().Version + " (" + runtime.Version(); err != nil || !strings.HasPrefix(out, want) {
		t.Errorf("server version: %v, %q; want it to start %q", err, out, want)
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary with")
	}
	bin := filepath.Join(t.TempDir(), "server")
	const stamped = "v9.8.7-6-gabcdef012345-dirty"
	build := exec.Command(goBin, "build", "-ldflags", "-X "+variable+"="+stamped, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runBin := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{} // no configuration at all
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("server %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	want := "paywebhooks receiver " + stamped + " (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if got := runBin(args...); got != want {
			t.Errorf("server %s = %q, want %q", strings.Join(args, " "), got, want)
		}
	}
	var info version.Info
	if err := json.Unmarshal([]byte(runBin("version", "--json")), &info); err != nil || info.Version != stamped || info.GoVersion != runtime.Version() {
		t.Errorf("server version --json: %+v, %v", info, err)
	}
}

// TestHealthcheck: `server healthcheck` GETs /healthz of a live receiver,
// found from HTTP_ADDR or given by --url, and exits 0; a server that
// answers anything but 200, redirects, does not answer in time, or is not
// there, exits 1. It needs no DATABASE_URL.
func TestHealthcheck(t *testing.T) {
	r := rt.New(t, providers.List())
	_, port, err := net.SplitHostPort(strings.TrimPrefix(r.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{
		{"HTTP_ADDR": ":" + port},
		{"HTTP_ADDR": "127.0.0.1:" + port},
		{"HTTP_ADDR": "0.0.0.0:" + port},
	} {
		out, errOut, err := cli(env, "healthcheck")
		if err != nil || out != "http://127.0.0.1:"+port+"/healthz: 200 OK\n" {
			t.Errorf("healthcheck with HTTP_ADDR=%s: %v, %q %q", env["HTTP_ADDR"], err, out, errOut)
		}
	}
	out, _, err := cli(nil, "healthcheck", "--url", r.URL+"/healthz", "--json")
	var rep struct {
		URL     string
		Status  int
		Healthy bool
		Error   string
	}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !rep.Healthy || rep.Status != 200 || rep.URL != r.URL+"/healthz" {
		t.Errorf("healthcheck --url --json: %v, %q", err, out)
	}

	hang := make(chan struct{})
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/unavailable":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, req, r.URL+"/healthz", http.StatusFound)
		case "/hang":
			select {
			case <-req.Context().Done():
			case <-hang:
			}
		}
	}))
	defer sick.Close()
	defer close(hang)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--url", sick.URL + "/unavailable"}, nil, "503 Service Unavailable"},
		{[]string{"--url", sick.URL + "/moved"}, nil, "302 Found"},
		{[]string{"--url", sick.URL + "/hang", "--timeout", "50ms"}, nil, "deadline exceeded"},
		{[]string{"--url", closed.URL + "/healthz"}, nil, "connection refused"},
		{nil, map[string]string{"HTTP_ADDR": strings.TrimPrefix(closed.URL, "http://")}, "connection refused"},
		{nil, map[string]string{"HTTP_ADDR": ":0"}, "a host:port with a fixed port is needed"},
	} {
		out, errOut, err := cli(c.env, append([]string{"healthcheck"}, c.args...)...)
		if exitCode(err) != exitFailure || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("healthcheck %v %v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, c.env, exitCode(err), out, errOut, c.want)
		}
	}
	out, _, err = cli(nil, "healthcheck", "--url", sick.URL+"/unavailable", "--json")
	if exitCode(err) != exitFailure || json.Unmarshal([]byte(out), &rep) != nil || rep.Healthy || rep.Status != 503 || rep.Error == "" {
		t.Errorf("healthcheck --json of a 503: exit %d, %q", exitCode(err), out)
	}
}

// lines is an io.Writer that hands each line written to it to a channel,
// so that a test waits on a log line rather than on time.
type lines struct {
	mu      sync.Mutex
	partial []byte
	c       chan string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		select {
		case l.c <- line:
		default: // nobody waits for more: the line is dropped
		}
	}
}

// TestServeLogsVersion: the server's start-up line names the version it
// was built as, and `server healthcheck` with the server's HTTP_ADDR finds
// it (the port it listens on, from its own log).
func TestServeLogsVersion(t *testing.T) {
	out := &lines{c: make(chan string, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, getenv(map[string]string{"DATABASE_URL": pgtest.NewDB(t), "HTTP_ADDR": "127.0.0.1:0",
			"MAIL_DIR": t.TempDir()}), out, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var start struct{ Version, Go string }
	var listening struct{ Addr string }
	timeout := time.After(30 * time.Second)
	for listening.Addr == "" {
		select {
		case line := <-out.c:
			var l struct{ Msg string }
			_ = json.Unmarshal([]byte(line), &l)
			switch l.Msg {
			case "starting receiver":
				_ = json.Unmarshal([]byte(line), &start)
			case "receiver listening":
				_ = json.Unmarshal([]byte(line), &listening)
			}
		case err := <-done:
			done <- err
			t.Fatalf("serve returned before it listened: %v", err)
		case <-timeout:
			t.Fatal("no 'receiver listening' line within 30 s")
		}
	}
	if v := version.Get(); start.Version != v.Version || start.Go != v.GoVersion {
		t.Errorf("starting receiver: version %q, go %q; want %q, %q", start.Version, start.Go, v.Version, v.GoVersion)
	}
	stdout, stderr, err := cli(map[string]string{"HTTP_ADDR": listening.Addr}, "healthcheck")
	if err != nil || !strings.HasSuffix(stdout, "/healthz: 200 OK\n") {
		t.Errorf("healthcheck of the serving receiver: %v, %q %q", err, stdout, stderr)
	}
}

// TestDidYouMean: an unknown command is answered with the nearest known
// one when it is a slip of the keyboard (a letter missing, added, replaced
// or swapped, or the start of the name), and with nothing otherwise.
func TestDidYouMean(t *testing.T) {
	names := []string{"serve", "migrate", "events", "reconcile", "healthcheck", "version", "help"}
	for _, c := range []struct{ name, want string }{
		{"evnets", "events"}, {"event", "events"}, {"EVENTS", "events"}, {"migarte", "migrate"}, {"helthcheck", "healthcheck"},
		{"health", "healthcheck"}, {"frobnicate", ""}, {"x", ""}, {"ev", ""}, {"list", ""}, {"replay", ""},
	} {
		got := didYouMean(c.name, names)
		if want := map[bool]string{true: "", false: `; did you mean "` + c.want + `"?`}[c.want == ""]; got != want {
			t.Errorf("didYouMean(%q) = %q, want %q", c.name, got, want)
		}
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "abc", 3}, {"abc", "abc", 0}, {"evnets", "events", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}

package providers_test

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
)

// The fork test: docs/adding-an-integration.md followed, in a copy of the
// repository, by a fork that adds a Standard Webhooks sender from the
// template (internal/providers/_template).
const (
	// forkName is the fork's sender: a name no provider has (the test
	// stops if one takes it), lower-case letters as a package and a route
	// want them.
	forkName = "zzfork"
	// forkCopyEnv is set in the copy's commands: the copy's own fork test
	// skips, not to fork the fork.
	forkCopyEnv = "PAYWEBHOOKS_FORK_COPY"
	// templateBlock marks the guide's commands that instantiate the
	// template; the test runs them as written, with its name.
	templateBlock = "<!-- TestForkFromTemplate runs this block -->"
	// forkFiles heads the guide's list of the files a fork touches.
	forkFiles = "## Every file a fork touches"
)

// TestForkFromTemplate forks the repository as the guide says, in a
// temporary copy of its files (those git tracks, and new ones it does not
// ignore): the template instantiated by the guide's own commands, the
// registry's line, the pages written by hand (the event table, the deploy
// guide's list, what no sender signed, the changelog, Docker Compose) and
// the generated blocks regenerated (go test ./internal/providers -update).
// Then the copy must build, vet and gofmt clean, pass the new provider's
// conformance suite and the doc tests (./internal/providers), and the
// tests elsewhere that go through every provider of the registry; and
// the files the fork touched outside its folder must be, exactly, those
// the guide lists under "Every file a fork touches". It logs them with
// their lines, and the fork's diff outside its folder when it fails (or,
// with -v, when FORK_TEST_DIFF is set).
func TestForkFromTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("forks the repository in a temporary copy and runs its tests: a minute or two")
	}
	if os.Getenv(forkCopyEnv) != "" {
		t.Skip("this is the fork's copy")
	}
	for _, s := range providers.All() {
		if s.Source == forkName {
			t.Fatalf("a provider is named %s: give the fork test another name", forkName)
		}
	}
	root := filepath.Dir(readmePath())
	guide, err := os.ReadFile(filepath.Join(root, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := forkList(string(guide))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	dir := t.TempDir()
	copyTree(t, root, dir)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "--no-verify", "-m", "before the fork")
	t.Logf("the copy: %s", time.Since(began).Round(time.Millisecond))

	step := func(what string, f func()) {
		t.Helper()
		start := time.Now()
		f()
		t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
	}
	step("the template, by the guide's commands", func() { instantiate(t, dir, string(guide)) })
	folder := "internal/providers/" + forkName + "/"
	if out, _ := exec.Command("grep", "-rIil", "sendername", filepath.Join(dir, folder)).Output(); len(out) > 0 {
		t.Fatalf("the guide's commands left the template's name in:\n%s", out)
	}
	step("the registry's line", func() { addRegistryLine(t, dir) })
	step("the pages written by hand", func() { writePages(t, dir) })
	step("go test ./internal/providers -update", func() { goCmd(t, dir, "test", "-count=1", "./internal/providers", "-update") })
	step("go build ./...", func() { goCmd(t, dir, "build", "./...") })
	step("go vet ./...", func() { goCmd(t, dir, "vet", "./...") })
	step("gofmt -l", func() {
		if out := run(t, dir, gofmt(t), "-l", folder, "internal/providers/providers.go"); strings.TrimSpace(out) != "" {
			t.Errorf("gofmt -l: %s", out)
		}
	})
	step("the new provider's conformance suite", func() {
		if out := goCmd(t, dir, "test", "-count=1", "-v", "./"+folder); !strings.Contains(out, "--- PASS: TestConformance ") {
			t.Errorf("go test -v ./%s ran no TestConformance:\n%s", folder, out)
		}
	})
	step("the doc tests", func() { goCmd(t, dir, "test", "-count=1", "./internal/providers/") })
	step("the tests that go through every provider of the registry", func() {
		goCmd(t, dir, "test", "-count=1", "-run", "^(TestEveryProvider|TestPoolReplaysTheSameEvents)$", "./cmd/loadgen/")
		goCmd(t, dir, "test", "-count=1", "-run", "^TestDevSecretsStart$", "./cmd/dev/")
	})

	git(t, dir, "add", "-A")
	numstat := git(t, dir, "diff", "--cached", "--numstat", "HEAD")
	var inside, outside, rows []string
	added, removed := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(numstat), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("git diff --numstat: %q", line)
		}
		if strings.HasPrefix(f[2], folder) {
			inside = append(inside, strings.TrimPrefix(f[2], folder))
			continue
		}
		outside = append(outside, f[2])
		rows = append(rows, fmt.Sprintf("%-32s +%s -%s", f[2], f[0], f[1]))
		var a, r int
		fmt.Sscan(f[0], &a)
		fmt.Sscan(f[1], &r)
		added, removed = added+a, removed+r
	}
	t.Logf("the fork's folder, %s: %s", folder, strings.Join(inside, ", "))
	t.Logf("outside it, %d files, +%d -%d lines:", len(outside), added, removed)
	for _, r := range rows {
		t.Logf("  %s", r)
	}
	for _, f := range outside {
		if !slices.Contains(listed, f) {
			t.Errorf("the fork touched %s, which the guide's %q does not list", f, forkFiles)
		}
	}
	for _, f := range listed {
		if !slices.Contains(outside, f) {
			t.Errorf("the guide's %q lists %s, which the fork did not touch", forkFiles, f)
		}
	}
	if t.Failed() || testing.Verbose() && os.Getenv("FORK_TEST_DIFF") != "" {
		t.Logf("the fork's diff outside its folder:\n%s", git(t, dir, "diff", "--cached", "HEAD", "--", ".", ":!"+folder))
	}
	t.Logf("the fork, from the copy to its last test: %s", time.Since(began).Round(time.Second))
}

// forkList is the files the guide says a fork touches outside its folder:
// the first backquoted path of each item of the list under forkFiles.
func forkList(guide string) ([]string, error) {
	_, section, ok := strings.Cut(guide, forkFiles+"\n")
	if !ok {
		return nil, fmt.Errorf("the guide has no section %q", forkFiles)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var files []string
	for _, m := range regexp.MustCompile("(?m)^- `([^`]+)`").FindAllStringSubmatch(section, -1) {
		files = append(files, m[1])
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("the guide's %q lists no file (items `- `path`…`)", forkFiles)
	}
	return files, nil
}

// copyTree copies into dst the files of the repository at root that git
// tracks, and the new ones it does not ignore, as they are in the working
// tree.
func copyTree(t *testing.T, root, dst string) {
	t.Helper()
	files := strings.Split(strings.TrimRight(git(t, root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00"), "\x00")
	for _, f := range files {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		switch {
		case os.IsNotExist(err): // deleted in the working tree
			continue
		case err != nil:
			t.Fatal(err)
		case !fi.Mode().IsRegular():
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// instantiate runs the guide's commands that make the template a
// provider, with the fork's names in place of the guide's example.
func instantiate(t *testing.T, dir, guide string) {
	t.Helper()
	_, after, ok := strings.Cut(guide, templateBlock+"\n```sh\n")
	if !ok {
		t.Fatalf("the guide has no sh block under %q", templateBlock)
	}
	block, _, _ := strings.Cut(after, "\n```")
	names := regexp.MustCompile(`(?m)^name=\S+ NAME=\S+ Name=\S+`)
	if !names.MatchString(block) {
		t.Fatalf("the guide's block does not start by naming the sender (name=… NAME=… Name=…):\n%s", block)
	}
	block = names.ReplaceAllLiteralString(block, "name="+forkName+" NAME="+strings.ToUpper(forkName)+" Name="+forkTitle())
	run(t, dir, "sh", "-ec", block)
}

// addRegistryLine adds the fork's import and line to the registry
// (internal/providers/providers.go), as the guide's step 3 says.
func addRegistryLine(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "internal/providers/providers.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	imp := "\t\"github.com/paywebhooks/receiver/internal/providers/"
	i := strings.LastIndex(s, imp)
	list := strings.Index(s, "return []registry.Provider{")
	if i < 0 || list < 0 {
		t.Fatal("providers.go has no provider import or no list (return []registry.Provider{)")
	}
	end := list + strings.Index(s[list:], "\n\t}\n")
	line := fmt.Sprintf("\n\t\t{Spec: %s.Spec, Endpoints: &%s.Endpoints},", forkName, forkName)
	s = s[:end] + line + s[end:]
	s = s[:i] + imp + forkName + "\"\n" + s[i:]
	out, err := format.Source([]byte(s))
	if err != nil {
		t.Fatalf("providers.go with the fork's line: %v\n%s", err, s)
	}
	write(t, path, string(out))
}

// writePages writes what the guide's steps 4 and 9 say a fork writes by
// hand: its event table (docs/events.md), where it sends and what to
// enable (docs/deploy.md), how it signs (docs/http.md), a changelog line
// and its secret in Docker Compose.
func writePages(t *testing.T, dir string) {
	t.Helper()
	route, secret := "/webhooks/"+forkName, strings.ToUpper(forkName)+"_WEBHOOK_SECRET"
	insert(t, dir, "docs/events.md", func(s string) (int, string) {
		return sectionEnd(s, strings.LastIndex(s, "<!-- /events -->")), "## " + forkTitle() + "\n\n" + forkTitle() +
			", keyed on the signed `webhook-id`: orders have `source` `" + forkName + "` and `external_id` the order id. " +
			"An order's payload gives its customer's address (`data.customer.email`).\n\n" +
			"<!-- events: " + forkName + " -->\n| event | write | steps |\n| --- | --- | --- |\n" +
			"| `order.paid` | order `paid`; the same order under another `webhook-id` changes nothing | " +
			"`email.confirmation` (address given), `fulfillment` |\n<!-- /events -->\n\n"
	})
	insert(t, dir, "docs/deploy.md", func(s string) (int, string) {
		return sectionEnd(s, strings.Index(s, "## The events to enable at each provider")), "**" + forkTitle() +
			"** (its dashboard > Webhooks, `https://<host>" + route + "`; the endpoint's secret is `" + secret +
			"`, as shown):\n\n- `order.paid`\n\n"
	})
	insert(t, dir, "docs/http.md", func(s string) (int, string) {
		return strings.Index(s, "\n- **Requests**"), "\n- **" + forkTitle() + "** signs the Standard Webhooks way, one key per " +
			"secret (`whsec_` and its base64): every `v1` against every secret, the timestamp within 5 minutes both ways, " +
			"the key the signed `webhook-id`."
	})
	insert(t, dir, "CHANGELOG.md", func(s string) (int, string) {
		const head, added = "## [Unreleased]\n\n", "### Added\n\n"
		entry := "- " + forkTitle() + " as a provider: `POST " + route + "` (`" + secret + "`), its `order.paid` an order, " +
			"its confirmation and its fulfillment call.\n"
		at := strings.Index(s, head)
		switch {
		case at < 0:
			return -1, ""
		case strings.HasPrefix(s[at+len(head):], added):
			return at + len(head) + len(added), entry
		}
		return at + len(head), added + entry + "\n"
	})
	insert(t, dir, "docker-compose.yml", func(s string) (int, string) {
		// After the receiver's secrets: the last of the first run of them
		// (comments between).
		secretLine := regexp.MustCompile(`^(\s+)[A-Z0-9_]+_WEBHOOK_SECRET: \$\{[A-Z0-9_]+:-\}$`)
		at, indent, pos := -1, "", 0
		for _, l := range strings.SplitAfter(s, "\n") {
			pos += len(l)
			if m := secretLine.FindStringSubmatch(strings.TrimSuffix(l, "\n")); m != nil {
				at, indent = pos, m[1]
			} else if at >= 0 && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				break
			}
		}
		return at, indent + secret + ": ${" + secret + ":-}\n"
	})
}

// forkTitle is the fork's sender's name in prose: capitalised.
func forkTitle() string { return strings.ToUpper(forkName[:1]) + forkName[1:] }

// sectionEnd is where the Markdown section that holds s[from:] ends: the
// start of the next "## " heading; -1 when from is or there is none.
func sectionEnd(s string, from int) int {
	if from < 0 {
		return -1
	}
	next := strings.Index(s[from:], "\n## ")
	if next < 0 {
		return -1
	}
	return from + next + 1
}

// insert writes into the file path of the copy the text where says, at
// the place it says: -1 when the place is gone.
func insert(t *testing.T, dir, path string, where func(string) (int, string)) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	at, text := where(s)
	if at < 0 {
		t.Fatalf("%s: the place the fork writes in is gone; update the fork test and the guide", path)
	}
	write(t, filepath.Join(dir, path), s[:at]+text+s[at:])
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs a command in dir, in the fork's environment, and returns its
// output; it fails the test with the output's end if the command fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = forkEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		s := out.String()
		if len(s) > 8000 {
			s = "…" + s[len(s)-8000:]
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, s)
	}
	return out.String()
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, "go", args...)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, "git", append([]string{"-c", "user.name=fork", "-c", "user.email=fork@example.com",
		"-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"}, args...)...)
}

// gofmt is the gofmt of the go command's toolchain.
func gofmt(t *testing.T) string {
	t.Helper()
	return filepath.Join(strings.TrimSpace(goCmd(t, ".", "env", "GOROOT")), "bin", "gofmt")
}

// forkEnv is the environment of the copy's commands: this one's
// (TEST_DATABASE_URL, GOTOOLCHAIN, the caches) less git's variables of
// another repository, with forkCopyEnv set.
func forkEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, forkCopyEnv+"=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
}

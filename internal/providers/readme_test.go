package providers_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

var update = flag.Bool("update", false, "rewrite the generated blocks of docs/ (the provider tables, the list of event types to enable) from the registry")

const begin, end = "<!-- providers: generated from internal/providers by `go test ./internal/providers -update`; do not edit -->", "<!-- /providers -->"

// The README is a front door; the reference it once held is in docs/, a
// page per subject, and these tests hold those pages to the code: the
// provider tables of docs/configuration.md and the list of event types to
// enable of docs/endpoints.md are generated from the registry, the event
// tables of docs/events.md are held to each provider's Spec.Types. (The
// tests keep their names, TestREADME…, which the guide and the changelog
// quote.)
const (
	configurationDoc = "docs/configuration.md"
	endpointsDoc     = "docs/endpoints.md"
	eventsDoc        = "docs/events.md"
)

// providerTables renders docs/configuration.md's tables of what every
// registered provider adds: its route and its variables.
func providerTables(specs []webhooks.Spec) string {
	var b strings.Builder
	b.WriteString("| route | signature headers | event types acted on | keys kept at least |\n| --- | --- | --- | --- |\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "| `POST %s` | `%s` | %s | %s |\n", s.Route(), strings.Join(s.SignatureHeaders, "`, `"),
			"`"+strings.Join(s.Types, "`, `")+"`", days(s.Retention))
	}
	b.WriteString("\n| variable | meaning | default |\n| --- | --- | --- |\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "| `%s` | %s | unset: `%s` is not mounted, and start-up says so |\n", s.Secret.Name, s.Secret.Doc, s.Route())
		for _, v := range s.Vars {
			def := "unset"
			if v.Default != "" {
				def = "`" + v.Default + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, v.Doc, def)
		}
	}
	return b.String()
}

func days(d interface{ Hours() float64 }) string {
	return fmt.Sprintf("%g days", d.Hours()/24)
}

// TestREADMEListsEveryProvider: the provider tables of
// docs/configuration.md are the registry's, so a provider added to
// internal/providers is documented by running `go test ./internal/providers
// -update`.
func TestREADMEListsEveryProvider(t *testing.T) {
	generated(t, configurationDoc, begin, end, providerTables(providers.All()), "provider tables")
}

const enableBegin, enableEnd = "<!-- enable: generated from internal/providers by `go test ./internal/providers -update`; do not edit -->", "<!-- /enable -->"

// TestREADMEEnableList: docs/endpoints.md's list of the event types to
// enable at each provider is, word for word, the one make run prints
// (endpoints.Enable, from every provider's Spec.Types), so a type a plan
// starts acting on is listed by running `go test ./internal/providers
// -update`.
func TestREADMEEnableList(t *testing.T) {
	list := providers.Enable()
	for _, s := range providers.All() {
		for _, typ := range s.Types {
			if !strings.Contains(list, typ) {
				t.Errorf("the list does not name %s's %s", s.Source, typ)
			}
		}
	}
	generated(t, endpointsDoc, enableBegin, enableEnd, "```text\n"+list+"```\n", "list of event types to enable")
}

// TestEndpointsChecked: what the registry hands the endpoint check (and the
// periodic check, which asks each whether it is configured) is only
// settings the check can read; the others, listed by make run alone, are
// not among them.
func TestEndpointsChecked(t *testing.T) {
	checked := map[string]bool{}
	for _, p := range providers.Endpoints() {
		if p.New == nil || p.Unconfigured == nil {
			t.Errorf("%s: endpoint settings without New or Unconfigured handed to the check", p.Source)
		}
		checked[p.Source] = true
	}
	for _, p := range providers.List() {
		if p.Endpoints != nil && p.Endpoints.New != nil && !checked[p.Spec.Source] {
			t.Errorf("%s: endpoint settings the check can read are not handed to it", p.Spec.Source)
		}
	}
}

// generated checks that the page doc (a path from the repository's root)
// holds want between the lines begin and end, and with -update writes it
// there.
func generated(t *testing.T, doc, begin, end, want, what string) {
	t.Helper()
	path := filepath.Join(filepath.Dir(readmePath()), doc)
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block between %q and %q", doc, begin, end)
	}
	want = begin + "\n" + want + end
	if got := s[i : j+len(end)]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(s[:i]+want+s[j+len(end):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's %s is not the registry's; run go test ./internal/providers -update. Want:\n%s", doc, what, want)
	}
}

// The event tables of docs/events.md ("What each event does") are written
// by hand, one per provider, each between `<!-- events: <source> -->` and
// `<!-- /events -->`.
// A row's first cell names its event types first, in backquotes and
// separated by ", ", a leading dot standing for the previous type less its
// last part (`customer.subscription.updated`, `.paused`); what follows
// qualifies them (`marketplace_purchase` `purchased`, `adjustment.created`
// with action `refund`).
var (
	eventsBlock = regexp.MustCompile("(?s)<!-- events: ([a-z0-9_-]+) -->\n(.*?)<!-- /events -->")
	leadTypes   = regexp.MustCompile("^`([^`]+)`((?:, `[^`]+`)*)")
)

// eventTableErrors says what the event tables of doc miss or name
// wrongly, against specs: every provider has a table; every type it acts
// on is in it; every type in it is one it acts on, unless the row says it
// is "not acted on".
func eventTableErrors(doc string, specs []webhooks.Spec) []string {
	var errs []string
	blocks := map[string]string{}
	for _, m := range eventsBlock.FindAllStringSubmatch(doc, -1) {
		if _, dup := blocks[m[1]]; dup {
			errs = append(errs, fmt.Sprintf("two event tables of %s", m[1]))
		}
		blocks[m[1]] = m[2]
	}
	for _, s := range specs {
		block, ok := blocks[s.Source]
		if !ok {
			errs = append(errs, fmt.Sprintf("no event table of %s (<!-- events: %s --> … <!-- /events -->)", s.Source, s.Source))
			continue
		}
		delete(blocks, s.Source)
		listed := map[string]bool{}
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "| ---") {
			errs = append(errs, fmt.Sprintf("the event table of %s is not a table", s.Source))
			continue
		}
		for _, row := range lines[2:] {
			cells := strings.Split(strings.Trim(row, "| "), " | ")
			m := leadTypes.FindStringSubmatch(strings.TrimSpace(cells[0]))
			if m == nil {
				errs = append(errs, fmt.Sprintf("%s: a row names no event type first: %s", s.Source, row))
				continue
			}
			types := []string{m[1]}
			for _, t := range strings.Split(m[2], ", ")[1:] {
				t = strings.Trim(t, "`")
				if strings.HasPrefix(t, ".") {
					prev := types[len(types)-1]
					t = prev[:max(strings.LastIndex(prev, "."), 0)] + t
				}
				types = append(types, t)
			}
			for _, t := range types {
				listed[t] = true
				if !s.Handles(t) && !strings.Contains(row, "not acted on") {
					errs = append(errs, fmt.Sprintf("%s: the event table names %s, a type the provider does not act on (say so in its row: \"not acted on\")", s.Source, t))
				}
			}
		}
		for _, t := range s.Types {
			if !listed[t] {
				errs = append(errs, fmt.Sprintf("%s: the event table does not say what %s does", s.Source, t))
			}
		}
	}
	for source := range blocks {
		errs = append(errs, fmt.Sprintf("an event table of %s, which is no registered provider", source))
	}
	sort.Strings(errs)
	return errs
}

// TestREADMEEventTables: docs/events.md says what every event type a
// provider acts on does, and names none it does not act on.
func TestREADMEEventTables(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(filepath.Dir(readmePath()), eventsDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eventTableErrors(string(page), providers.All()) {
		t.Error(e)
	}
}

// TestEventTableErrors: the check finds a type missing from a table, a
// type no provider acts on, abbreviations and qualifiers read as they are
// meant, and a provider without a table.
func TestEventTableErrors(t *testing.T) {
	specs := []webhooks.Spec{
		{Source: "acme", Types: []string{"order.paid", "order.refunded", "ping"}},
		{Source: "zeta", Types: []string{"x.y"}},
	}
	readme := "<!-- events: acme -->\n| event | write | steps |\n| --- | --- | --- |\n" +
		"| `order.paid` paid / `no_payment_required` | order | none |\n" +
		"| `order.created`, `.updated` | none | none |\n" +
		"| `order.voided` | none: not acted on | none |\n" +
		"| `ping` `zen` | none | none |\n<!-- /events -->\n" +
		"<!-- events: other -->\n| a | b |\n| --- | --- |\n<!-- /events -->\n"
	want := []string{
		"acme: the event table does not say what order.refunded does",
		"acme: the event table names order.created, a type the provider does not act on (say so in its row: \"not acted on\")",
		"acme: the event table names order.updated, a type the provider does not act on (say so in its row: \"not acted on\")",
		"an event table of other, which is no registered provider",
		"no event table of zeta (<!-- events: zeta --> … <!-- /events -->)",
	}
	if diff := cmp.Diff(want, eventTableErrors(readme, specs)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// readmePath is the README's path, from this file's; the repository's
// root is its folder.
func readmePath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "README.md")
}

// The guide to adding an integration (docs/adding-an-integration.md) is
// written from the last fork, and kept true by TestGuide: a Go block (or
// any block) marked `<!-- from <path> -->` is found, line for line, in that
// file (indented as it is there); a Go block without a marker is an error;
// every path the page names in backquotes exists; and every file of the
// template a fork starts from is named in its list of files, where every
// file named is the template's, the worked example's (Polar's) or the
// repository's. (TestForkFromTemplate holds the rest of that list to a
// fork.)
const (
	guidePath     = "docs/adding-an-integration.md"
	guideTemplate = "internal/providers/_template"
	guideExample  = "internal/providers/polar"
	guideListed   = forkFiles
)

var (
	fromMarker = regexp.MustCompile(`^<!-- from (\S+) -->$`)
	pathToken  = regexp.MustCompile("`((?:internal|cmd|e2e|docs|migrations|bench|scripts)/[A-Za-z0-9_./-]+|" +
		"README\\.md|CHANGELOG\\.md|CONTRIBUTING\\.md|docker-compose\\.yml|go\\.mod|Makefile)`")
	fileToken = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.(?:go|json|sql))`")
)

// guideErrors says what in the guide doc is not true of the tree at root.
func guideErrors(doc, root string) []string {
	var errs []string
	read := func(path string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			return "", false
		}
		return string(b), true
	}
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		start := i
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		block := strings.Join(lines[start+1:min(i, len(lines))], "\n")
		marker := ""
		if start > 0 {
			if m := fromMarker.FindStringSubmatch(lines[start-1]); m != nil {
				marker = m[1]
			}
		}
		switch {
		case marker == "" && lang == "go":
			errs = append(errs, fmt.Sprintf("line %d: a Go block without <!-- from <path> --> above it", start+1))
		case marker != "":
			if src, ok := read(marker); ok && !containsBlock(src, block) {
				errs = append(errs, fmt.Sprintf("line %d: the block is not in %s as written:\n%s", start+1, marker, block))
			}
		}
	}
	for _, m := range pathToken.FindAllStringSubmatch(doc, -1) {
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			errs = append(errs, fmt.Sprintf("the guide names %s, which does not exist", m[1]))
		}
	}
	_, listed, ok := strings.Cut(doc, guideListed)
	if !ok {
		errs = append(errs, fmt.Sprintf("the guide has no section %q", guideListed))
	}
	listed, _, _ = strings.Cut(listed, "\n## ")
	for _, m := range fileToken.FindAllStringSubmatch(listed, -1) {
		found := false
		for _, dir := range []string{guideTemplate, guideExample, ""} {
			if _, err := os.Stat(filepath.Join(root, dir, m[1])); err == nil {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("the list of files names %s, in neither %s, %s nor the repository", m[1], guideTemplate, guideExample))
		}
	}
	err := filepath.WalkDir(filepath.Join(root, guideTemplate), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root, guideTemplate), path)
		if !strings.Contains(listed, "`"+filepath.ToSlash(rel)+"`") {
			errs = append(errs, fmt.Sprintf("the list of files does not name %s/%s", guideTemplate, rel))
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Sprintf("the template: %v", err))
	}
	return errs
}

// containsBlock reports whether src has block's lines in a row, each
// indented by what the first is indented by there (a blank line blank).
func containsBlock(src, block string) bool {
	sl, bl := strings.Split(src, "\n"), strings.Split(block, "\n")
	for i := 0; i+len(bl) <= len(sl); i++ {
		indent, ok := strings.CutSuffix(sl[i], bl[0])
		if !ok || strings.TrimLeft(indent, "\t ") != "" {
			continue
		}
		match := true
		for k := 1; k < len(bl) && match; k++ {
			want := indent + bl[k]
			if bl[k] == "" {
				want = ""
			}
			match = sl[i+k] == want
		}
		if match {
			return true
		}
	}
	return false
}

// TestGuide: docs/adding-an-integration.md is true of the code (see
// guideErrors).
func TestGuide(t *testing.T) {
	root := filepath.Dir(readmePath())
	doc, err := os.ReadFile(filepath.Join(root, guidePath))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range guideErrors(string(doc), root) {
		t.Error(e)
	}
}

// TestGuideErrors: the guide's check finds a block that changed, a Go
// block without its source, a path that does not exist and a file of the
// template left out of its list.
func TestGuideErrors(t *testing.T) {
	root := t.TempDir()
	for path, text := range map[string]string{
		"internal/providers/polar/polar.go":                "package polar\n\nfunc A() {\n\treturn\n}\n\nfunc B() {\n\tif x {\n\t\ty()\n\t}\n}\n",
		"internal/providers/polar/api.go":                  "package polar\n",
		"internal/providers/_template/sendername.go":       "package sendername\n",
		"internal/providers/_template/testdata/order.json": "{}\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := "# Guide\n\n<!-- from internal/providers/polar/polar.go -->\n```go\nfunc A() {\n\treturn\n}\n```\n\n" +
		"<!-- from internal/providers/polar/polar.go -->\n```go\nif x {\n\ty()\n}\n```\n\n" +
		"<!-- from internal/providers/polar/polar.go -->\n```go\nfunc B() {\n\ty()\n}\n```\n\n" +
		"```go\nfunc C() {}\n```\n\nSee `internal/providers/polar/gone.go`.\n\n" +
		guideListed + "\n\n`sendername.go`, `api.go`, `missing.go`.\n"
	want := []string{
		"line 18: the block is not in internal/providers/polar/polar.go as written:\nfunc B() {\n\ty()\n}",
		"line 24: a Go block without <!-- from <path> --> above it",
		"the guide names internal/providers/polar/gone.go, which does not exist",
		"the list of files names missing.go, in neither internal/providers/_template, internal/providers/polar nor the repository",
		"the list of files does not name internal/providers/_template/testdata/order.json",
	}
	if diff := cmp.Diff(want, guideErrors(doc, root)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

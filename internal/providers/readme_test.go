package providers_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

var update = flag.Bool("update", false, "rewrite the README's provider tables from the registry")

const begin, end = "<!-- providers: generated from internal/providers by `go test ./internal/providers -update`; do not edit -->", "<!-- /providers -->"

// providerTables renders the README's tables of what every registered
// provider adds: its route and its variables.
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

// TestREADMEListsEveryProvider: the README's provider tables are the
// registry's, so a provider added to internal/providers is documented by
// running `go test ./internal/providers -update`.
func TestREADMEListsEveryProvider(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no block between %q and %q", begin, end)
	}
	want := begin + "\n" + providerTables(providers.All()) + end
	if got := s[i : j+len(end)]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(s[:i]+want+s[j+len(end):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("README.md's provider tables are not the registry's; run go test ./internal/providers -update. Want:\n%s", want)
	}
}

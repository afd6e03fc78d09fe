package mail_test

import (
	"os"
	"strings"
	"testing"

	mailpkg "github.com/paywebhooks/receiver/internal/mail"
)

// TestTemplatesDocumented: docs/operations.md lists every built-in
// template, on a line of its own, with every field the template uses, so
// that a team writing MAIL_TEMPLATES_DIR knows what it can use.
func TestTemplatesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(doc)) {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok := strings.Cut(rest, "`"); ok {
				rows[name] = line
			}
		}
	}
	for _, name := range mailpkg.Builtin().Names() {
		row, ok := rows[name]
		if !ok {
			t.Errorf("docs/operations.md has no row for the template %s", name)
			continue
		}
		for _, f := range mailpkg.Builtin().Fields(name) {
			if !strings.Contains(row, "`."+f+"`") {
				t.Errorf("docs/operations.md: the row of %s does not name its field `.%s`", name, f)
			}
		}
	}
}

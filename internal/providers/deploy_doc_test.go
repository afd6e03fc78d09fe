package providers_test

import (
	"os"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/providers"
)

// TestDeployGuideListsEveryEvent: docs/deploy.md tells an operator which
// events to enable at each provider: every type each registered provider
// acts on (its Spec.Types) is named there, under its route.
func TestDeployGuideListsEveryEvent(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## The events to enable at each provider")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, s := range providers.All() {
		if !strings.Contains(section, s.Route()+"`") {
			t.Errorf("docs/deploy.md does not say where %s sends (%s)", s.Source, s.Route())
		}
		for _, typ := range s.Types {
			if !strings.Contains(section, "`"+typ+"`") {
				t.Errorf("docs/deploy.md does not list %s's event type %s", s.Source, typ)
			}
		}
	}
}

package endpoints

import (
	"fmt"
	"strings"
)

// Enable is the first hour's list: for each target, where its endpoint is
// set up and the exact event types to enable there, from its Spec.Types
// (the list its plan handles), so that a fork's new event type appears by
// itself. `make run` prints it, and docs/endpoints.md holds it word for word
// (TestREADMEEnableList).
func Enable(targets []Target) string {
	var b strings.Builder
	b.WriteString("Event types to enable at each provider, on the endpoint that sends to PUBLIC_URL + the route\n" +
		"(server endpoints check --create makes it where the provider's API can; server endpoints check says what is missing):\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "  %s, %s, at %s:\n    %s\n", t.Spec.Source, t.Spec.Route(), t.Provider.Where, strings.Join(t.Spec.Types, ","))
	}
	return b.String()
}

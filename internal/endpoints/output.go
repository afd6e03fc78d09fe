package endpoints

import (
	"fmt"
	"io"
	"strings"
)

// Write writes the report for a person: a line per finding as found, a
// line per change made (and the signing secret of an endpoint created,
// once, with what to do with it) and, after changes, a line per problem
// they left; then a summary line per provider and a last line. A run that
// found nothing wrong writes the summary only.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(f.String() + "\n")
	}
	for _, c := range r.Changes {
		b.WriteString(c.String() + "\n")
	}
	for _, c := range r.Created {
		b.WriteString(c.String())
	}
	if len(r.Changes)+len(r.Created) > 0 {
		// What the changes left, as the API shows it now.
		for _, f := range r.Remaining {
			if !f.Note {
				b.WriteString("left: " + f.String() + "\n")
			}
		}
	}
	for _, s := range r.Providers {
		b.WriteString(s.String() + "\n")
	}
	b.WriteString(r.last() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// String is what one change did.
func (c Changed) String() string {
	var did []string
	if c.Change.Enable {
		did = append(did, "re-enabled")
	}
	if len(c.Change.Added) > 0 {
		did = append(did, fmt.Sprintf("subscribed to %s (%d event types in all)", list(c.Change.Added), len(c.Change.Events)))
	}
	if c.Change.Version != "" {
		did = append(did, "set to API version "+c.Change.Version)
	}
	what := strings.Join(did, "; ")
	if c.Error != "" {
		return fmt.Sprintf("%s %s: NOT changed (%s): %s", c.Source, untrusted(c.Endpoint), what, c.Error)
	}
	return fmt.Sprintf("%s %s: changed: %s", c.Source, untrusted(c.Endpoint), what)
}

// String is what one creation did, on as many lines as it takes: the
// endpoint's signing secret is shown here and nowhere else.
func (c Created) String() string {
	if c.Error != "" {
		return fmt.Sprintf("%s: NOT created an endpoint for %s: %s\n", c.Source, c.URL, c.Error)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: created, sending %s to %s", c.Source, untrusted(c.Endpoint), plural(c.Types, "event type", "event types"), c.URL)
	if c.Version != "" {
		b.WriteString(", pinned to API version " + c.Version)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  its signing secret, shown this once: %s\n", c.Secret)
	if len(c.Replaces) > 0 {
		fmt.Fprintf(&b, "  add it to %s after the current one (comma-separated: both are accepted while both endpoints send), "+
			"restart the receiver, then delete %s at the provider\n", c.SecretVar, list(c.Replaces))
	} else {
		fmt.Fprintf(&b, "  set %s to it (comma-separated after the current one, if any) and restart the receiver: "+
			"until then its deliveries are refused and retried\n", c.SecretVar)
	}
	return b.String()
}

// String is one provider's summary line.
func (s Summary) String() string {
	switch {
	case s.Skipped != "":
		return fmt.Sprintf("%s: not checked: %s", s.Source, s.Skipped)
	case !s.Checked:
		return fmt.Sprintf("%s: check failed: %s", s.Source, s.Error)
	}
	var b strings.Builder
	b.WriteString(s.Source + ": ")
	if s.Elsewhere != "" && s.Endpoints == 0 {
		b.WriteString("nothing this API shows sends to " + s.URL)
	} else {
		fmt.Fprintf(&b, "%s to %s", plural(s.Endpoints, "endpoint sends", "endpoints send"), s.URL)
	}
	if s.Others > 0 {
		fmt.Fprintf(&b, " (%s elsewhere, left alone)", plural(s.Others, "other sends", "others send"))
	}
	switch {
	case s.Problems > 0:
		b.WriteString(": " + plural(s.Problems, "problem", "problems"))
	default:
		b.WriteString(": right")
	}
	if s.Notes > 0 {
		b.WriteString(", " + plural(s.Notes, "note", "notes"))
	}
	if s.Elsewhere != "" {
		b.WriteString("; " + s.Elsewhere)
	}
	if s.Error != "" {
		b.WriteString("; " + s.Error)
	}
	return b.String()
}

// last is the report's last line.
func (r Report) last() string {
	checked, failed, problems := r.Checked(), r.Failed(), r.Problems()
	var b strings.Builder
	fmt.Fprintf(&b, "endpoints check: %s of %d checked", plural(checked, "provider", "providers"), len(r.Providers))
	switch {
	case checked == 0:
		b.WriteString(": nothing could be checked (set a provider's API key)")
	case problems == 0 && failed == 0:
		b.WriteString(", nothing wrong")
	default:
		if problems > 0 {
			b.WriteString(", " + plural(problems, "problem", "problems") + " left")
		}
		if failed > 0 {
			b.WriteString(", " + plural(failed, "failure", "failures"))
		}
	}
	return b.String()
}

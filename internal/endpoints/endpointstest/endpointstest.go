// Package endpointstest is the suite every provider's endpoint settings
// (endpoints.Provider) pass, against the fake of the provider's API, as
// River's drivers pass riverdrivertest: a provider's endpoints_test.go
// describes its fake (Fake) and calls Run.
//
// Each case builds the fake's endpoints, runs the check as `server
// endpoints check` runs it (the configuration loaded from the provider's
// variables, PUBLIC_URL https://pay.example.com) and holds it to what it
// must find and change: a right setup (nothing but the summary), a
// disabled endpoint, two event types not sent, another API version, an
// endpoint of another URL left alone by --fix, a listing that pages, no
// endpoint at all (--create), and event types sent that nothing handles (a
// note).
package endpointstest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// PublicURL is the receiver's public base URL in every case.
const PublicURL = "https://pay.example.com"

// Fake is a provider's fake API as the suite drives it.
type Fake struct {
	// Target is the provider's Spec and endpoint settings.
	Target endpoints.Target
	// Env are the provider's variables that point its client at the fake
	// (the API key, the base URL) and its secret.
	Env map[string]string
	// Add adds an endpoint to the fake, of ep's URL, Enabled, Events and
	// Version, and returns its id.
	Add func(ep endpoints.Endpoint) string
	// Get returns an endpoint as the fake holds it (its URL, Enabled,
	// Events, Version); ok is false when there is none.
	Get func(id string) (ep endpoints.Endpoint, ok bool)
	// List returns the ids of every endpoint the fake holds.
	List func() []string
	// Delete deletes an endpoint, as an operator does at the provider.
	Delete func(id string)
	// Listings counts the listing requests the fake answered so far.
	Listings func() int
	// OtherVersion is an API version the provider's endpoints may send in
	// that the receiver does not read; "" when the provider has none.
	OtherVersion string
}

// Run runs every case, each on a fake of its own from newFake.
func Run(t *testing.T, newFake func(t *testing.T) Fake) {
	t.Run("Right", func(t *testing.T) { right(t, newFake(t)) })
	t.Run("Disabled", func(t *testing.T) { disabled(t, newFake(t)) })
	t.Run("TwoMissingTypes", func(t *testing.T) { twoMissing(t, newFake(t)) })
	t.Run("VersionDrift", func(t *testing.T) { drift(t, newFake(t)) })
	t.Run("OtherURLLeftAlone", func(t *testing.T) { otherURL(t, newFake(t)) })
	t.Run("ListingPages", func(t *testing.T) { pages(t, newFake(t)) })
	t.Run("Missing", func(t *testing.T) { missing(t, newFake(t)) })
	t.Run("UnhandledIsANote", func(t *testing.T) { unhandled(t, newFake(t)) })
}

// url is the receiver's URL for f's provider.
func (f Fake) url() string { return PublicURL + f.Target.Spec.Route() }

// right is an endpoint that sends every type the provider acts on to the
// receiver, enabled, in the version the receiver reads.
func (f Fake) right() endpoints.Endpoint {
	return endpoints.Endpoint{URL: f.url(), Enabled: true, Events: slices.Clone(f.Target.Spec.Types), Version: f.Target.Provider.Version}
}

// check runs the check with o, as the command does, with listings of
// pageSize (0: the API's largest).
func (f Fake) check(t *testing.T, o endpoints.Options, pageSize int) endpoints.Report {
	t.Helper()
	r := Check(t, f.Target, f.Env, o, pageSize)
	if s := r.Providers[0]; s.Error != "" || !s.Checked {
		t.Fatalf("the check failed: %+v", s)
	}
	return r
}

// Check runs the check of target as `server endpoints check` runs it, with
// o, the configuration loaded from env (the provider's variables) with
// PUBLIC_URL, and listings of pageSize (0: the API's largest).
func Check(t *testing.T, target endpoints.Target, env map[string]string, o endpoints.Options, pageSize int) endpoints.Report {
	t.Helper()
	all := map[string]string{"DATABASE_URL": "postgres://receiver@localhost:5432/receiver", "PUBLIC_URL": PublicURL}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := wiring.Load(func(k string) string { return all[k] }, []webhooks.Spec{target.Spec})
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	c := &endpoints.Check{PublicURL: cfg.PublicURL, Targets: []endpoints.Target{target}, Settings: cfg.Settings, PageSize: pageSize}
	r, err := c.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return r
}

// Text is the report as the command prints it.
func Text(t *testing.T, r endpoints.Report) string {
	t.Helper()
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// kinds are the kinds of fs, in order.
func kinds(fs []endpoints.Finding) []endpoints.Kind {
	var out []endpoints.Kind
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

func get(t *testing.T, f Fake, id string) endpoints.Endpoint {
	t.Helper()
	ep, ok := f.Get(id)
	if !ok {
		t.Fatalf("the fake has no endpoint %s", id)
	}
	return ep
}

func right(t *testing.T, f Fake) {
	f.Add(f.right())
	r := f.check(t, endpoints.Options{}, 0)
	out := Text(t, r)
	if !r.OK() || len(r.Findings) != 0 {
		t.Fatalf("a right setup: OK %v, findings %v\n%s", r.OK(), kinds(r.Findings), out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], f.Target.Spec.Source+": 1 endpoint sends to "+f.url()+": right") ||
		lines[1] != "endpoints check: 1 provider of 1 checked, nothing wrong" {
		t.Errorf("a right setup printed more than the summary:\n%s", out)
	}
}

func disabled(t *testing.T, f Fake) {
	ep := f.right()
	ep.Enabled = false
	id := f.Add(ep)
	r := f.check(t, endpoints.Options{}, 0)
	if got := kinds(r.Findings); !slices.Equal(got, []endpoints.Kind{endpoints.KindDisabled}) || r.OK() {
		t.Fatalf("a disabled endpoint: findings %v, OK %v\n%s", got, r.OK(), Text(t, r))
	}
	if !strings.Contains(Text(t, r), "disabled") || r.Findings[0].Fix != "fix" {
		t.Errorf("the finding does not say it is disabled, nor that --fix fixes it:\n%s", Text(t, r))
	}
	r = f.check(t, endpoints.Options{Fix: true}, 0)
	if len(r.Changes) != 1 || !r.Changes[0].Change.Enable || r.Changes[0].Error != "" || !r.OK() {
		t.Fatalf("--fix: changes %+v, OK %v\n%s", r.Changes, r.OK(), Text(t, r))
	}
	if got := get(t, f, id); !got.Enabled || !slices.Equal(got.Events, f.Target.Spec.Types) {
		t.Errorf("after --fix the endpoint is %+v, want it enabled with its events as they were", got)
	}
	if !strings.Contains(Text(t, r), "changed: re-enabled") {
		t.Errorf("--fix does not say what it changed:\n%s", Text(t, r))
	}
}

func twoMissing(t *testing.T, f Fake) {
	types := f.Target.Spec.Types
	if len(types) < 3 {
		t.Fatalf("the provider acts on %d types; the case needs 3", len(types))
	}
	ep := f.right()
	lacks := []string{types[1], types[2]}
	ep.Events = slices.DeleteFunc(slices.Clone(types), func(s string) bool { return slices.Contains(lacks, s) })
	id := f.Add(ep)
	r := f.check(t, endpoints.Options{}, 0)
	if got := kinds(r.Findings); !slices.Equal(got, []endpoints.Kind{endpoints.KindMissingTypes}) || !slices.Equal(r.Findings[0].Types, lacks) {
		t.Fatalf("two types not sent: findings %+v\n%s", r.Findings, Text(t, r))
	}
	if out := Text(t, r); !strings.Contains(out, "not sent 2 event types the receiver acts on: "+lacks[0]+", "+lacks[1]) {
		t.Errorf("the line does not name the two types:\n%s", out)
	}
	r = f.check(t, endpoints.Options{Fix: true}, 0)
	if !r.OK() || len(r.Changes) != 1 || !slices.Equal(r.Changes[0].Change.Added, lacks) {
		t.Fatalf("--fix: changes %+v, remaining %v\n%s", r.Changes, kinds(r.Remaining), Text(t, r))
	}
	want := append(slices.Clone(ep.Events), lacks...) // the whole list: what it had, and what it lacked
	if got := get(t, f, id); !slices.Equal(got.Events, want) || !got.Enabled {
		t.Errorf("after --fix the endpoint sends %v, want %v", got.Events, want)
	}
}

func drift(t *testing.T, f Fake) {
	p := f.Target.Provider
	if p.Version == "" {
		t.Skipf("%s's endpoints have no API version", p.Source)
	}
	ep := f.right()
	ep.Version = f.OtherVersion
	id := f.Add(ep)
	r := f.check(t, endpoints.Options{}, 0)
	if got := kinds(r.Findings); !slices.Equal(got, []endpoints.Kind{endpoints.KindVersion}) {
		t.Fatalf("another version: findings %v\n%s", got, Text(t, r))
	}
	if out := Text(t, r); !strings.Contains(out, "endpoint version "+f.OtherVersion+", receiver reads "+p.Version) {
		t.Errorf("the line does not name both versions:\n%s", out)
	}
	if p.UpdatesVersion {
		r = f.check(t, endpoints.Options{Fix: true}, 0)
		if got := get(t, f, id); got.Version != p.Version || !r.OK() {
			t.Errorf("after --fix the endpoint's version is %q (OK %v), want %s\n%s", got.Version, r.OK(), p.Version, Text(t, r))
		}
		return
	}
	// The version cannot be changed: --fix leaves it, --create makes an
	// endpoint pinned to the receiver's, and the old one is left for the
	// operator to delete once its secret is swapped.
	r = f.check(t, endpoints.Options{Fix: true}, 0)
	if len(r.Changes) != 0 || r.OK() {
		t.Fatalf("--fix changed %+v of an endpoint whose version it cannot change", r.Changes)
	}
	r = f.check(t, endpoints.Options{Fix: true, Create: true}, 0)
	if len(r.Created) != 1 || r.Created[0].Error != "" || r.Created[0].Version != p.Version || r.Created[0].Secret == "" ||
		!slices.Equal(r.Created[0].Replaces, []string{id}) {
		t.Fatalf("--create: %+v\n%s", r.Created, Text(t, r))
	}
	created := get(t, f, r.Created[0].Endpoint)
	if created.Version != p.Version || !slices.Equal(created.Events, f.Target.Spec.Types) || created.URL != f.url() {
		t.Errorf("the endpoint created is %+v, want every type, pinned to %s", created, p.Version)
	}
	if out := Text(t, r); strings.Count(out, r.Created[0].Secret) != 1 || !strings.Contains(out, "delete "+id) {
		t.Errorf("--create does not print the secret once and say to delete the old endpoint:\n%s", out)
	}
	if got := kinds(r.Remaining); !slices.Equal(got, []endpoints.Kind{endpoints.KindVersion}) ||
		!strings.Contains(r.Remaining[0].Text, r.Created[0].Endpoint+" sends here pinned to "+p.Version) {
		t.Errorf("after --create the old endpoint is still another version, and the line says which sends pinned: %+v", r.Remaining)
	}
	if again := f.check(t, endpoints.Options{Create: true}, 0); len(again.Created) != 0 {
		t.Errorf("--create again created %+v: one pinned endpoint already sends here", again.Created)
	}
	f.Delete(id)
	if r := f.check(t, endpoints.Options{}, 0); !r.OK() || len(r.Findings) != 0 {
		t.Errorf("with the old endpoint deleted: findings %v", kinds(r.Findings))
	}
}

func otherURL(t *testing.T, f Fake) {
	f.Add(f.right())
	other := endpoints.Endpoint{URL: "https://other.example.com/hooks", Enabled: false, Events: f.Target.Spec.Types[:1],
		Version: f.OtherVersion}
	if other.Version == "" {
		other.Version = f.Target.Provider.Version
	}
	id := f.Add(other)
	before := get(t, f, id)
	r := f.check(t, endpoints.Options{Fix: true, Create: true}, 0)
	if !r.OK() || len(r.Findings) != 0 || len(r.Changes) != 0 || len(r.Created) != 0 || r.Providers[0].Others != 1 {
		t.Fatalf("another URL's endpoint: findings %v, changes %+v, created %+v, summary %+v",
			kinds(r.Findings), r.Changes, r.Created, r.Providers[0])
	}
	after := get(t, f, id)
	if after.Enabled != before.Enabled || !slices.Equal(after.Events, before.Events) || after.Version != before.Version || after.URL != before.URL {
		t.Errorf("--fix changed another URL's endpoint: %+v, was %+v", after, before)
	}
	if out := Text(t, r); !strings.Contains(out, "(1 other sends elsewhere, left alone)") {
		t.Errorf("the summary does not say another endpoint was left alone:\n%s", out)
	}
}

func pages(t *testing.T, f Fake) {
	for i := range 4 {
		f.Add(endpoints.Endpoint{URL: "https://other.example.com/" + string(rune('a'+i)), Enabled: true,
			Events: f.Target.Spec.Types, Version: f.Target.Provider.Version})
	}
	ep := f.right()
	ep.Enabled = false
	f.Add(ep)
	before := f.Listings()
	r := f.check(t, endpoints.Options{}, 2)
	if got := f.Listings() - before; got < 3 {
		t.Errorf("5 endpoints in pages of 2 were read in %d requests", got)
	}
	if got := kinds(r.Findings); !slices.Equal(got, []endpoints.Kind{endpoints.KindDisabled}) || r.Providers[0].Others != 4 {
		t.Errorf("listing in pages: findings %v, summary %+v", got, r.Providers[0])
	}
}

func missing(t *testing.T, f Fake) {
	f.Add(endpoints.Endpoint{URL: "https://other.example.com/hooks", Enabled: true, Events: f.Target.Spec.Types,
		Version: f.Target.Provider.Version})
	r := f.check(t, endpoints.Options{}, 0)
	if got := kinds(r.Findings); !slices.Equal(got, []endpoints.Kind{endpoints.KindMissing}) || r.Findings[0].Fix != "create" {
		t.Fatalf("no endpoint: findings %+v", r.Findings)
	}
	if len(f.List()) != 1 {
		t.Fatal("the check without --create created an endpoint")
	}
	r = f.check(t, endpoints.Options{Fix: true}, 0)
	if len(f.List()) != 1 || r.OK() {
		t.Fatal("--fix alone created an endpoint")
	}
	r = f.check(t, endpoints.Options{Create: true}, 0)
	if len(r.Created) != 1 || r.Created[0].Secret == "" || r.Created[0].SecretVar != f.Target.Spec.Secret.Name || !r.OK() {
		t.Fatalf("--create: %+v, remaining %v\n%s", r.Created, kinds(r.Remaining), Text(t, r))
	}
	created := get(t, f, r.Created[0].Endpoint)
	if created.URL != f.url() || !created.Enabled || !slices.Equal(created.Events, f.Target.Spec.Types) ||
		created.Version != f.Target.Provider.Version {
		t.Errorf("the endpoint created is %+v", created)
	}
	if out := Text(t, r); strings.Count(out, r.Created[0].Secret) != 1 || !strings.Contains(out, "set "+f.Target.Spec.Secret.Name+" to it") {
		t.Errorf("--create does not print the secret once, with what to do with it:\n%s", out)
	}
	if r := f.check(t, endpoints.Options{Create: true}, 0); len(r.Created) != 0 || !r.OK() {
		t.Errorf("--create again: %+v", r.Created)
	}
}

func unhandled(t *testing.T, f Fake) {
	ep := f.right()
	ep.Events = append(ep.Events, "zz_unhandled.thing")
	f.Add(ep)
	r := f.check(t, endpoints.Options{}, 0)
	if got := kinds(r.Findings); !slices.Equal(got, []endpoints.Kind{endpoints.KindUnhandled}) || !r.Findings[0].Note || !r.OK() {
		t.Fatalf("a type nothing handles: findings %+v, OK %v", r.Findings, r.OK())
	}
	if out := Text(t, r); !strings.Contains(out, "(note): sends 1 event type nothing here handles: zz_unhandled.thing (a cost, not an error") ||
		!strings.Contains(out, "right, 1 note") {
		t.Errorf("the note:\n%s", out)
	}
}

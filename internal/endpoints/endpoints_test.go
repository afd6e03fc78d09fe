package endpoints_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// memory is a provider's endpoints held in memory: a Client, an Updater
// and a Creator, whose calls can fail.
type memory struct {
	eps       []endpoints.Endpoint
	listErr   error
	updateErr error
	updates   int
}

func (m *memory) Endpoints(context.Context) ([]endpoints.Endpoint, error) {
	return slices.Clone(m.eps), m.listErr
}

func (m *memory) Update(_ context.Context, ep endpoints.Endpoint, ch endpoints.Change) (endpoints.Endpoint, error) {
	m.updates++
	if m.updateErr != nil {
		return endpoints.Endpoint{}, m.updateErr
	}
	for i := range m.eps {
		if m.eps[i].ID == ep.ID {
			m.eps[i].Enabled = m.eps[i].Enabled || ch.Enable
			if ch.Events != nil {
				m.eps[i].Events = ch.Events
			}
			return m.eps[i], nil
		}
	}
	return endpoints.Endpoint{}, errors.New("no such endpoint")
}

// target is a provider "acme" acting on three types, its endpoints in m
// (nil: it cannot be checked: no API key).
func target(m *memory) endpoints.Target {
	return endpoints.Target{
		Spec: webhooks.Spec{Source: "acme", Types: []string{"order.paid", "order.refunded", "ping"},
			Secret: webhooks.Var{Name: "ACME_WEBHOOK_SECRET"}},
		Provider: endpoints.Provider{Source: "acme", Where: "Acme > Webhooks",
			Unconfigured: func(func(string) string) string {
				if m == nil {
					return "ACME_API_KEY is unset"
				}
				return ""
			},
			New: func(endpoints.Env) (endpoints.Client, error) { return m, nil }},
	}
}

func run(t *testing.T, o endpoints.Options, secret bool, targets ...endpoints.Target) endpoints.Report {
	t.Helper()
	c := &endpoints.Check{PublicURL: "https://pay.example.com/", Targets: targets,
		Settings: func(string) webhooks.Settings {
			s := webhooks.Settings{Env: func(string) string { return "" }}
			if secret {
				s.Secrets = []string{"s3cr3t"}
			}
			return s
		}}
	r, err := c.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func text(t *testing.T, r endpoints.Report) string {
	t.Helper()
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

const here = "https://pay.example.com/webhooks/acme"

// TestRouteOff: an endpoint that sends to a route the receiver does not
// serve (its secret unset) is a problem, whatever else is right.
func TestRouteOff(t *testing.T) {
	m := &memory{eps: []endpoints.Endpoint{{ID: "ep_1", URL: here, Enabled: true, Events: []string{"order.paid", "order.refunded", "ping"}}}}
	r := run(t, endpoints.Options{}, false, target(m))
	if len(r.Findings) != 1 || r.Findings[0].Kind != endpoints.KindRouteOff || r.OK() {
		t.Fatalf("findings %+v", r.Findings)
	}
	if want := "acme ep_1: sends to /webhooks/acme, a route this receiver does not serve: ACME_WEBHOOK_SECRET is unset"; !strings.HasPrefix(r.Findings[0].String(), want) {
		t.Errorf("line %q, want it to start %q", r.Findings[0].String(), want)
	}
}

// TestProvidersApart: a provider without its API key is not checked, one
// whose API fails is reported and the others are still checked; a failed
// change is reported, and counts as a failure.
func TestProvidersApart(t *testing.T) {
	broken := target(&memory{listErr: errors.New("api down")})
	broken.Spec.Source, broken.Provider.Source = "broken", "broken"
	skipped := target(nil)
	skipped.Spec.Source, skipped.Provider.Source = "skipped", "skipped"
	m := &memory{eps: []endpoints.Endpoint{{ID: "ep_1", URL: here + "/", Events: []string{"order.paid", "order.refunded", "ping"}}},
		updateErr: errors.New("forbidden")}
	r := run(t, endpoints.Options{Fix: true}, true, skipped, broken, target(m))
	out := text(t, r)
	for _, want := range []string{
		"acme ep_1: disabled: acme sends it nothing; --fix re-enables it\n",
		"acme ep_1: NOT changed (re-enabled): forbidden\n",
		"skipped: not checked: ACME_API_KEY is unset\n",
		"broken: check failed: api down\n",
		"acme: 1 endpoint sends to " + here + ": 1 problem\n",
		"endpoints check: 1 provider of 3 checked, 1 problem left, 2 failures\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if r.OK() || r.Failed() != 2 || m.updates != 1 {
		t.Errorf("OK %v, failed %d, updates %d", r.OK(), r.Failed(), m.updates)
	}
	if r := run(t, endpoints.Options{}, true, skipped); r.OK() || !strings.Contains(text(t, r), "nothing could be checked") {
		t.Errorf("nothing checked is not OK:\n%s", text(t, r))
	}
}

// TestElsewhere: a provider whose events are set up where its API does
// not show needs no endpoint here and no type, and says what to check by
// hand.
func TestElsewhere(t *testing.T) {
	tg := target(&memory{})
	tg.Provider.Elsewhere = "check the other place by hand"
	r := run(t, endpoints.Options{Fix: true, Create: true}, true, tg)
	if !r.OK() || len(r.Findings) != 0 {
		t.Fatalf("findings %+v", r.Findings)
	}
	if want := "acme: nothing this API shows sends to " + here + ": right; check the other place by hand\n"; !strings.Contains(text(t, r), want) {
		t.Errorf("the summary:\n%s\nwant %q", text(t, r), want)
	}
}

// TestNoPublicURL: without PUBLIC_URL the check reads nothing and says
// why; a PUBLIC_URL that is not a base URL is refused.
func TestNoPublicURL(t *testing.T) {
	m := &memory{listErr: errors.New("must not be called")}
	c := &endpoints.Check{Targets: []endpoints.Target{target(m)}}
	if _, err := c.Run(context.Background(), endpoints.Options{}); !errors.Is(err, endpoints.ErrNoPublicURL) {
		t.Errorf("without PUBLIC_URL: %v", err)
	}
	for _, tc := range []struct{ in, want string }{
		{"https://pay.example.com/", "https://pay.example.com"},
		{"https://pay.example.com/shop", "https://pay.example.com/shop"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://pay.example.com", ""},
		{"pay.example.com", ""},
		{"https://user:pw@pay.example.com", ""},
		{"https://pay.example.com/?x=1", ""},
		{"https://pay.example.com/#top", ""},
		{"ftp://pay.example.com", ""},
	} {
		got, err := endpoints.ParsePublicURL(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("ParsePublicURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestSameURL(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://pay.example.com/webhooks/stripe", "https://PAY.example.com:443/webhooks/stripe/", true},
		{"https://pay.example.com/webhooks/stripe", "HTTPS://pay.example.com/webhooks/stripe", true},
		{"https://pay.example.com/webhooks/stripe", "http://pay.example.com/webhooks/stripe", false},
		{"https://pay.example.com/webhooks/stripe", "https://pay.example.com:8443/webhooks/stripe", false},
		{"https://pay.example.com/webhooks/stripe", "https://pay.example.com/webhooks/Stripe", false},
		{"https://pay.example.com/webhooks/stripe", "https://pay.example.com/webhooks/stripe?x=1", false},
		{"https://pay.example.com/webhooks/stripe", "https://pay.example.com.evil.test/webhooks/stripe", false},
	} {
		if got := endpoints.SameURL(tc.a, tc.b); got != tc.same {
			t.Errorf("SameURL(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// TestFindingIdentity: a finding's ID is stable and safe in an alert's
// key, whatever the provider's id holds; its line escapes what the API
// sent.
func TestFindingIdentity(t *testing.T) {
	f := endpoints.Finding{Source: "stripe", Kind: endpoints.KindDisabled, Endpoint: "we_1:x/y\nz", Text: "disabled"}
	if got := f.ID(); got != "stripe:disabled:we_1xyz" {
		t.Errorf("ID %q", got)
	}
	if got := f.String(); got != `stripe we_1:x/y\nz: disabled` {
		t.Errorf("line %q", got)
	}
	if got := f.Title(); got != `stripe endpoint we_1:x/y\nz: disabled` {
		t.Errorf("title %q", got)
	}
	for _, id := range []string{"", ".", "..", "we_1/../x", "we 1", strings.Repeat("a", 129)} {
		if endpoints.ValidID(id) == nil {
			t.Errorf("ValidID(%q) took it", id)
		}
	}
	if err := endpoints.ValidID("ntfset_01h04vsc0qhwtsbsxh3422wjs4"); err != nil {
		t.Error(err)
	}
}

// TestEnable: the first hour's list names every target's route, where it
// is set up, and its types, from the Spec.
func TestEnable(t *testing.T) {
	want := "Event types to enable at each provider, on the endpoint that sends to PUBLIC_URL + the route\n" +
		"(server endpoints check --create makes it where the provider's API can; server endpoints check says what is missing):\n" +
		"  acme, /webhooks/acme, at Acme > Webhooks:\n    order.paid,order.refunded,ping\n"
	if diff := cmp.Diff(want, endpoints.Enable([]endpoints.Target{target(&memory{})})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

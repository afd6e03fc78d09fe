package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Kind is what a finding is about.
type Kind string

// The kinds of findings the check makes itself; a provider's own
// (Problem.Kind) are others.
const (
	// KindMissing: no endpoint sends to this receiver.
	KindMissing Kind = "missing"
	// KindDisabled: the provider sends the endpoint nothing.
	KindDisabled Kind = "disabled"
	// KindMissingTypes: event types the receiver acts on are not sent.
	KindMissingTypes Kind = "missing_types"
	// KindUnhandled: event types are sent that nothing handles (a note).
	KindUnhandled Kind = "unhandled_types"
	// KindVersion: the endpoint sends in another API version than the
	// receiver reads, or in none pinned.
	KindVersion Kind = "version"
	// KindRouteOff: an endpoint sends to a route the receiver does not
	// serve (the provider's secret is unset).
	KindRouteOff Kind = "route_off"
)

// Finding is one thing wrong with how a provider sends to this receiver.
type Finding struct {
	Source string `json:"source"`
	Kind   Kind   `json:"kind"`
	// Endpoint is the endpoint's id ("" for KindMissing); URL where the
	// receiver takes the provider's deliveries.
	Endpoint string `json:"endpoint,omitempty"`
	URL      string `json:"url"`
	// Types are the event types it is about (missing, or not handled).
	Types []string `json:"types,omitempty"`
	// Note: a cost, not a problem: it changes neither the exit status nor
	// the alerts.
	Note bool `json:"note,omitempty"`
	// Fix says what corrects it: "fix" (--fix), "create" (--create), ""
	// (the operator, as Text says).
	Fix string `json:"fix,omitempty"`
	// Text is the finding as one line says it, after its source and
	// endpoint.
	Text string `json:"text"`
}

// ID is the finding's identity, the same in every run while it lasts:
// "stripe:disabled:we_123". The endpoint alert is raised once per ID and
// hour.
func (f Finding) ID() string {
	id := f.Source + ":" + string(f.Kind)
	if f.Endpoint != "" {
		id += ":" + idPart(f.Endpoint)
	}
	return id
}

// idPart is s with only letters, digits, '_', '-' and '.', at most 64 of
// them: an id from a provider's API, in an alert's key.
func idPart(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// String is the finding's line: its source, its endpoint and its text.
func (f Finding) String() string {
	s := f.Source
	if f.Endpoint != "" {
		s += " " + untrusted(f.Endpoint)
	}
	if f.Note {
		s += " (note)"
	}
	return s + ": " + f.Text
}

// Title says in a few words what the finding is about: "stripe endpoint
// we_123: disabled", for an alert's title.
func (f Finding) Title() string {
	what := map[Kind]string{KindMissing: "no endpoint sends here", KindDisabled: "disabled",
		KindMissingTypes: plural(len(f.Types), "event type", "event types") + " acted on not sent",
		KindVersion:      "another API version", KindRouteOff: "sends to a route not served",
		KindUnhandled: "sends event types nothing handles"}[f.Kind]
	if what == "" {
		what = strings.ReplaceAll(string(f.Kind), "_", " ")
	}
	if f.Endpoint == "" {
		return f.Source + ": " + what
	}
	return f.Source + " endpoint " + untrusted(f.Endpoint) + ": " + what
}

// Target is a provider the check reads: its Spec and its endpoint
// settings.
type Target struct {
	Spec     webhooks.Spec
	Provider Provider
}

// Targets pairs each spec with the endpoint settings of the same source
// among ps; a spec without is left out.
func Targets(specs []webhooks.Spec, ps []Provider) []Target {
	var out []Target
	for _, s := range specs {
		for _, p := range ps {
			if p.Source == s.Source {
				out = append(out, Target{Spec: s, Provider: p})
			}
		}
	}
	return out
}

// Options are the options of one run.
type Options struct {
	// Fix changes what --fix changes: re-enables this receiver's
	// endpoints, subscribes them to the missing types, and sets their
	// version where the provider can.
	Fix bool
	// Create creates the endpoint a provider lacks (or, where an
	// endpoint's version cannot be changed, one pinned to the version the
	// receiver reads).
	Create bool
}

// Check reads and judges how every target sends to the receiver at
// PublicURL.
type Check struct {
	// PublicURL is PUBLIC_URL, the receiver's public base URL.
	PublicURL string
	Targets   []Target
	// Settings returns a provider's configuration (wiring.Setup.Settings).
	Settings func(source string) webhooks.Settings
	// HTTPClient and PageSize, when set, are every provider's (Env;
	// tests).
	HTTPClient *http.Client
	PageSize   int
	// Limits bound a run; zero fields take DefaultLimits'.
	Limits reconcile.Limits
}

// DefaultLimits bound one run of the check: a few requests per provider
// are what a genuine API needs.
var DefaultLimits = reconcile.Limits{Timeout: 2 * time.Minute, MaxRequests: 500, MaxPages: 200, MaxBody: 8 << 20}

// ErrNoPublicURL is a check run without PUBLIC_URL: which endpoints are
// this receiver's cannot be told.
var ErrNoPublicURL = errors.New("PUBLIC_URL is unset, so which of the providers' endpoints are this receiver's " +
	"cannot be told: set it to the receiver's public base URL (https://pay.example.com), the one the providers send to")

// Report is what one run found and did.
type Report struct {
	PublicURL string    `json:"public_url"`
	Providers []Summary `json:"providers"`
	// Findings are what the run found; Remaining what is still wrong
	// after its changes (the same when it changed nothing).
	Findings  []Finding `json:"findings"`
	Changes   []Changed `json:"changes,omitempty"`
	Created   []Created `json:"created,omitempty"`
	Remaining []Finding `json:"remaining"`
}

// Summary is how one provider's check went.
type Summary struct {
	Source string `json:"source"`
	URL    string `json:"url"`
	// Checked is false when the provider could not be checked: Skipped
	// says why (its API key is unset), or Error.
	Checked bool   `json:"checked"`
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Endpoints send to URL; Others send elsewhere, and are left alone.
	Endpoints int `json:"endpoints"`
	Others    int `json:"others"`
	// Problems and Notes remain after the run's changes.
	Problems int `json:"problems"`
	Notes    int `json:"notes"`
	// Elsewhere is the provider's Provider.Elsewhere.
	Elsewhere string `json:"elsewhere,omitempty"`
}

// Changed is an endpoint --fix changed, or failed to.
type Changed struct {
	Source   string `json:"source"`
	Endpoint string `json:"endpoint"`
	Change   Change `json:"change"`
	Error    string `json:"error,omitempty"`
}

// Created is an endpoint --create created, or failed to.
type Created struct {
	Source   string `json:"source"`
	Endpoint string `json:"endpoint,omitempty"`
	URL      string `json:"url"`
	Version  string `json:"version,omitempty"`
	Types    int    `json:"types"`
	// Secret is its signing secret, which the provider shows only once;
	// SecretVar the variable that must hold it.
	Secret    string `json:"secret,omitempty"`
	SecretVar string `json:"secret_var"`
	// Replaces are the endpoints it is meant to replace (another version),
	// for the operator to delete once the secret is in SecretVar.
	Replaces []string `json:"replaces,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Problems counts the problems that remain (notes aside).
func (r Report) Problems() int {
	n := 0
	for _, f := range r.Remaining {
		if !f.Note {
			n++
		}
	}
	return n
}

// Failed counts the providers whose check failed, and the changes that
// did.
func (r Report) Failed() int {
	n := 0
	for _, s := range r.Providers {
		if s.Error != "" {
			n++
		}
	}
	for _, c := range r.Changes {
		if c.Error != "" {
			n++
		}
	}
	for _, c := range r.Created {
		if c.Error != "" {
			n++
		}
	}
	return n
}

// Checked counts the providers that were checked.
func (r Report) Checked() int {
	n := 0
	for _, s := range r.Providers {
		if s.Checked {
			n++
		}
	}
	return n
}

// OK reports whether the run found nothing wrong that remains, and checked
// at least one provider without failing.
func (r Report) OK() bool { return r.Problems() == 0 && r.Failed() == 0 && r.Checked() > 0 }

// Run reads every target's endpoints and judges them; with o.Fix or
// o.Create it changes them, then reads them again for what remains. A
// provider that fails is reported in its Summary, and the others are still
// checked. It returns ErrNoPublicURL, having read nothing, when PublicURL is
// unset.
func (c *Check) Run(ctx context.Context, o Options) (Report, error) {
	base, err := ParsePublicURL(c.PublicURL)
	if err != nil {
		return Report{}, err
	}
	limits := c.Limits
	if limits == (reconcile.Limits{}) {
		limits = DefaultLimits
	}
	ctx, unbound := reconcile.Bound(ctx, limits)
	defer unbound()
	r := Report{PublicURL: base, Findings: []Finding{}, Remaining: []Finding{}}
	for _, t := range c.Targets {
		c.one(ctx, t, base, o, &r)
	}
	return r, nil
}

// ParsePublicURL checks PUBLIC_URL and returns it without a trailing
// slash: an absolute https:// URL (http:// only to a loopback host), with
// no user, query or fragment. "" is ErrNoPublicURL.
func ParsePublicURL(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", ErrNoPublicURL
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "", errors.New("PUBLIC_URL must be an absolute https:// URL, the receiver's public base URL (https://pay.example.com)")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?"):
		return "", errors.New("PUBLIC_URL must carry no user, password, query or fragment: it is the base the routes are added to")
	case u.Scheme == "http" && reconcile.CheckAPIBase(v) != nil:
		return "", errors.New("PUBLIC_URL must be https:// (providers send to https; http:// only to a loopback host, for tests)")
	}
	return strings.TrimRight(v, "/"), nil
}

// SameURL reports whether a and b name the same endpoint URL: scheme and
// host compared without case, a default port the same as none, the path
// with and without a trailing slash, the query exactly.
func SameURL(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	norm := func(u *url.URL) string {
		host, port := strings.ToLower(u.Hostname()), u.Port()
		scheme := strings.ToLower(u.Scheme)
		if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
			port = ""
		}
		return scheme + "://" + host + ":" + port + strings.TrimRight(u.EscapedPath(), "/") + "?" + u.RawQuery
	}
	return norm(ua) == norm(ub)
}

// one checks one target into r.
func (c *Check) one(ctx context.Context, t Target, base string, o Options, r *Report) {
	p := t.Provider
	s := Summary{Source: t.Spec.Source, URL: base + t.Spec.Route(), Elsewhere: p.Elsewhere}
	settings := c.Settings(t.Spec.Source)
	if why := p.Unconfigured(settings.Env); why != "" {
		s.Skipped = why
		r.Providers = append(r.Providers, s)
		return
	}
	client, err := p.New(Env{Settings: settings, URL: s.URL, HTTPClient: c.HTTPClient, PageSize: c.PageSize})
	if err != nil {
		s.Error = err.Error()
		r.Providers = append(r.Providers, s)
		return
	}
	j := judge{target: t, url: s.URL, routeOn: len(settings.Secrets) > 0, updates: isUpdater(client), creates: isCreator(client)}
	eps, err := client.Endpoints(ctx)
	if err != nil {
		s.Error = reconcile.Cause(ctx, err).Error()
		r.Providers = append(r.Providers, s)
		return
	}
	mine, others := split(eps, s.URL)
	found := j.findings(mine)
	r.Findings = append(r.Findings, found...)
	remaining := found

	changed := false
	if o.Fix {
		if u, ok := client.(Updater); ok {
			for _, ep := range mine {
				ch, ok := j.change(ep)
				if !ok {
					continue
				}
				_, err := u.Update(ctx, ep, ch)
				rec := Changed{Source: s.Source, Endpoint: ep.ID, Change: ch}
				if err != nil {
					rec.Error = reconcile.Cause(ctx, err).Error()
				} else {
					changed = true
				}
				r.Changes = append(r.Changes, rec)
			}
		}
	}
	if o.Create {
		if cr, ok := client.(Creator); ok {
			if need, replaces := j.needsCreate(mine); need {
				rec := Created{Source: s.Source, URL: s.URL, Version: p.Version, Types: len(t.Spec.Types),
					SecretVar: t.Spec.Secret.Name, Replaces: replaces}
				ep, secret, err := cr.Create(ctx, s.URL, slices.Clone(t.Spec.Types), p.Version)
				if err != nil {
					rec.Error = reconcile.Cause(ctx, err).Error()
				} else {
					rec.Endpoint, rec.Secret, changed = ep.ID, secret, true
				}
				r.Created = append(r.Created, rec)
			}
		}
	}
	if changed {
		// What remains is what the API shows now.
		eps, err = client.Endpoints(ctx)
		if err != nil {
			s.Error = "read again after the changes: " + reconcile.Cause(ctx, err).Error()
		} else {
			mine, others = split(eps, s.URL)
			remaining = j.findings(mine)
		}
	}
	s.Checked = true
	s.Endpoints, s.Others = len(mine), others
	for _, f := range remaining {
		if f.Note {
			s.Notes++
		} else {
			s.Problems++
		}
	}
	r.Remaining = append(r.Remaining, remaining...)
	r.Providers = append(r.Providers, s)
}

func isUpdater(c Client) bool { _, ok := c.(Updater); return ok }
func isCreator(c Client) bool { _, ok := c.(Creator); return ok }

// split returns the endpoints that send to u, and how many send
// elsewhere.
func split(eps []Endpoint, u string) (mine []Endpoint, others int) {
	for _, ep := range eps {
		if SameURL(ep.URL, u) {
			mine = append(mine, ep)
		} else {
			others++
		}
	}
	return mine, others
}

// judge holds what one provider's endpoints are judged against.
type judge struct {
	target  Target
	url     string
	routeOn bool // the provider's secret is set: the route is served
	updates bool // the client can change an endpoint
	creates bool // the client can create one
}

// wanted are the event types an endpoint of the provider must send: those
// its plan handles, unless they are set up elsewhere.
func (j judge) wanted() []string {
	if j.target.Provider.Elsewhere != "" {
		return nil
	}
	return j.target.Spec.Types
}

// missing are the types of wanted that ep is not subscribed to.
func (j judge) missing(ep Endpoint) []string {
	if ep.All {
		return nil
	}
	var out []string
	for _, t := range j.wanted() {
		if !slices.Contains(ep.Events, t) {
			out = append(out, t)
		}
	}
	return out
}

// unhandled are the types ep is subscribed to that the provider does not
// act on.
func (j judge) unhandled(ep Endpoint) []string {
	var out []string
	for _, t := range ep.Events {
		if !j.target.Spec.Handles(t) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// versionOK reports whether ep sends in the version the receiver reads.
func (j judge) versionOK(ep Endpoint) bool {
	v := j.target.Provider.Version
	return v == "" || ep.Version == v
}

// findings judges the endpoints that send to the receiver.
func (j judge) findings(mine []Endpoint) []Finding {
	p, spec := j.target.Provider, j.target.Spec
	src := spec.Source
	var out []Finding
	if len(mine) == 0 {
		if p.Elsewhere == "" {
			f := Finding{Source: src, Kind: KindMissing, URL: j.url,
				Text: fmt.Sprintf("no endpoint sends to %s: %s are never received; ", j.url, plural(len(spec.Types), "event type", "event types"))}
			if j.creates {
				f.Fix, f.Text = "create", f.Text+"--create makes one"
				if p.Version != "" {
					f.Text += " pinned to " + p.Version
				}
				f.Text += ", or add it at " + p.Where
			} else {
				f.Text += "add it at " + p.Where
			}
			out = append(out, f)
		}
		return out
	}
	pinned := ""
	for _, ep := range mine {
		if ep.Enabled && j.versionOK(ep) && p.Version != "" {
			pinned = ep.ID
		}
	}
	for _, ep := range mine {
		base := Finding{Source: src, Endpoint: ep.ID, URL: j.url}
		if !j.routeOn {
			f := base
			f.Kind = KindRouteOff
			f.Text = fmt.Sprintf("sends to %s, a route this receiver does not serve: %s is unset (every delivery is answered 404)",
				spec.Route(), spec.Secret.Name)
			out = append(out, f)
		}
		if !ep.Enabled {
			f := base
			f.Kind = KindDisabled
			f.Text = "disabled"
			if ep.Status != "" {
				f.Text += " (" + untrusted(ep.Status) + ")"
			}
			f.Text += ": " + src + " sends it nothing"
			if j.updates {
				f.Fix, f.Text = "fix", f.Text+"; --fix re-enables it"
			} else {
				f.Text += "; enable it at " + p.Where
			}
			out = append(out, f)
		}
		if missing := j.missing(ep); len(missing) > 0 {
			f := base
			f.Kind, f.Types = KindMissingTypes, missing
			f.Text = fmt.Sprintf("not sent %s the receiver acts on: %s", plural(len(missing), "event type", "event types"), list(missing))
			if j.updates {
				f.Fix, f.Text = "fix", f.Text+"; --fix subscribes it"
			} else {
				f.Text += "; subscribe it at " + p.Where
			}
			out = append(out, f)
		}
		if !j.versionOK(ep) {
			f := base
			f.Kind = KindVersion
			v := "endpoint version " + untrusted(ep.Version)
			if ep.Version == "" {
				v = "endpoint version not pinned (the account's default, which this check cannot read)"
			}
			f.Text = fmt.Sprintf("%s, receiver reads %s", v, p.Version)
			switch {
			case j.updates && p.UpdatesVersion:
				f.Fix, f.Text = "fix", f.Text+"; --fix sets it"
			case pinned != "":
				f.Text += fmt.Sprintf("; %s sends here pinned to %s: once %s holds its signing secret, delete this one",
					untrusted(pinned), p.Version, spec.Secret.Name)
			case j.creates:
				f.Fix = "create"
				f.Text += fmt.Sprintf("; an endpoint's version cannot be changed: --create makes one pinned to %s "+
					"(then put its secret in %s and delete this one)", p.Version, spec.Secret.Name)
			default:
				f.Text += "; set it at " + p.Where
			}
			out = append(out, f)
		}
		for _, pr := range ep.Problems {
			f := base
			f.Kind, f.Text = Kind(idPart(pr.Kind)), pr.Text
			out = append(out, f)
		}
		if unhandled := j.unhandled(ep); len(unhandled) > 0 || ep.All {
			f := base
			f.Kind, f.Note, f.Types = KindUnhandled, true, unhandled
			if ep.All {
				f.Text = "sends every event type (*), most of which nothing here handles"
			} else {
				f.Text = fmt.Sprintf("sends %s nothing here handles: %s", plural(len(unhandled), "event type", "event types"), list(unhandled))
			}
			f.Text += " (a cost, not an error: each is acknowledged, stored and ignored)"
			out = append(out, f)
		}
	}
	return out
}

// change is what --fix changes of ep, and whether there is anything.
func (j judge) change(ep Endpoint) (Change, bool) {
	var ch Change
	ch.Enable = !ep.Enabled
	if missing := j.missing(ep); len(missing) > 0 {
		ch.Events = append(slices.Clone(ep.Events), missing...)
		ch.Added = missing
	}
	if !j.versionOK(ep) && j.target.Provider.UpdatesVersion {
		ch.Version = j.target.Provider.Version
	}
	return ch, ch.Enable || ch.Events != nil || ch.Version != ""
}

// needsCreate reports whether --create creates an endpoint: none sends to
// the receiver, or (where an endpoint's version cannot be changed) none in
// the version the receiver reads; replaces are the endpoints it replaces.
func (j judge) needsCreate(mine []Endpoint) (bool, []string) {
	p := j.target.Provider
	if p.Elsewhere != "" {
		return false, nil
	}
	if len(mine) == 0 {
		return true, nil
	}
	if p.Version == "" || p.UpdatesVersion {
		return false, nil
	}
	var replaces []string
	for _, ep := range mine {
		if j.versionOK(ep) {
			return false, nil
		}
		replaces = append(replaces, ep.ID)
	}
	return true, replaces
}

// untrusted is a value from a provider's API as a line shows it.
func untrusted(s string) string { return reqlog.Untrusted(s, 200) }

// maxListed bounds the event types a line names.
const maxListed = 30

// list names types, at most maxListed of them.
func list(types []string) string {
	var names []string
	for i, t := range types {
		if i == maxListed {
			names = append(names, fmt.Sprintf("…and %d more", len(types)-maxListed))
			break
		}
		names = append(names, untrusted(t))
	}
	return strings.Join(names, ", ")
}

// plural is webhooks.Plural.
func plural(n int, one, many string) string { return webhooks.Plural(n, one, many) }

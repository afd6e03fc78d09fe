// Package endpoints checks how each provider is set up to send to this
// receiver, and corrects it when asked: the framework of `server endpoints
// check`, of the periodic check (RECONCILE_INTERVAL) and of the first
// hour's list of event types to enable, and nothing of any provider.
//
// Most lost webhooks are lost before the receiver sees them: an endpoint
// subscribed to some of the events the receiver acts on and not others, an
// endpoint the provider disabled after failed deliveries, one that sends
// in another API version or mode than the receiver reads. The receiver
// knows which event types it acts on (each provider's Spec.Types, the
// list its plan handles), and holds API keys for catching up: so it reads
// each provider's endpoint settings (Client), keeps those that send to
// PUBLIC_URL + the provider's route (SameURL), and says what is wrong with
// them, one Finding each. A provider offers its endpoint settings beside
// its Spec (Provider, registered in internal/providers); the check knows
// providers only through it, so a fork's provider, and a fork's new event
// type, are checked by themselves.
//
// A finding is a problem (the receiver misses events, or reads them in a
// shape it was not written for: no endpoint, a disabled one, event types
// acted on that are not sent, another API version, another mode), which
// makes the command exit 1 and the periodic check raise the endpoint
// alert, or a note (events sent that nothing handles: a cost, each
// acknowledged and stored, never an error), which is printed and changes
// neither.
//
// With Options.Fix the check changes what it can of this receiver's
// endpoints through the provider's update call (Updater): it re-enables
// them and subscribes them to the missing types (the whole list, what
// they had and what they lacked), and, where the provider can change it,
// their API version. With Options.Create it creates the endpoint a
// provider lacks (Creator), pinned to the version the receiver reads, and
// returns its signing secret once. It never deletes an endpoint, and
// never touches one that sends elsewhere.
//
// Every run is bounded as a reconciliation's is (reconcile.Bound): the
// providers' clients are reconcile.NewClient's (the API's origin only,
// each response bounded) and their listings are read by List, which
// follows reconcile.Pages and bounds what it holds by reconcile.Hold.
package endpoints

import (
	"context"
	"fmt"
	"net/http"

	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Endpoint is one endpoint of a provider as its API shows it: a Stripe
// webhook endpoint, a Paddle notification destination, a Polar webhook
// endpoint, a GitHub App's hook.
type Endpoint struct {
	// ID is the provider's id of it (we_…, ntfset_…, a UUID).
	ID string `json:"id"`
	// URL is where it sends.
	URL string `json:"url"`
	// Enabled is false when the provider sends it nothing; Status then
	// says how the provider puts it ("status disabled", "active false").
	Enabled bool   `json:"enabled"`
	Status  string `json:"status,omitempty"`
	// Events are the event types it is subscribed to; All, that it is
	// subscribed to every one (Stripe's "*").
	Events []string `json:"events"`
	All    bool     `json:"all_events,omitempty"`
	// Version is the API version it sends events in; "" when it is not
	// pinned (it sends in the account's default version) or the provider
	// has no versions (Provider.Version is then "").
	Version string `json:"version,omitempty"`
	// Problems are what the provider's own rules find wrong with it:
	// another mode, a payload format the receiver does not read.
	Problems []Problem `json:"problems,omitempty"`
}

// Problem is something a provider's own rules find wrong with one of its
// endpoints.
type Problem struct {
	// Kind is one word, the last part of the finding's identity: mode,
	// format, traffic, tls.
	Kind string `json:"kind"`
	// Text says what is wrong and what to do, without naming the
	// endpoint: "is a live-mode endpoint, and STRIPE_LIVEMODE is false".
	Text string `json:"text"`
}

// Provider is a provider's endpoint settings, offered by its package and
// registered in internal/providers beside its Spec.
type Provider struct {
	// Source is the Spec.Source of the provider.
	Source string
	// Where says where an operator sets the endpoint up by hand ("Stripe
	// Dashboard > Developers > Webhooks"), for the first hour's list and
	// the findings.
	Where string
	// Version is the API version of the events the receiver reads; an
	// endpoint that sends in another (or in none pinned) is a finding. "":
	// the provider's endpoints have no version.
	Version string
	// UpdatesVersion: the provider's update call can change an endpoint's
	// API version, so --fix does. Otherwise an endpoint in another version
	// is replaced by one --create makes, pinned.
	UpdatesVersion bool
	// Elsewhere, when set, says that the events the receiver acts on are
	// set up where this API does not show (GitHub's Marketplace and
	// Sponsors webhooks): no endpoint, or event types not sent, are then
	// no finding, and the check says Elsewhere instead; what the API shows
	// is still checked for what it sends here.
	Elsewhere string
	// Unconfigured says which of the provider's variables the check lacks
	// (its API key), or "" when it can run. env reads the provider's
	// variables. reconcile.Requires makes it of the variables' names.
	Unconfigured func(env func(string) string) string
	// New builds the provider's client (ClientOf its calls). Its HTTP
	// client should be reconcile.NewClient's. Nil (and Unconfigured nil
	// too) for endpoints that no API the check reads shows (Stripe's event
	// destinations): the first hour's list names them (Enable), and the
	// registry hands them to no check.
	New func(Env) (Client, error)
}

// Env is what a provider's client is built from.
type Env struct {
	Settings webhooks.Settings // the provider's configuration
	// URL is where this receiver takes the provider's deliveries:
	// PUBLIC_URL + its route.
	URL string
	// HTTPClient, when set, makes the requests instead of
	// reconcile.NewClient's (tests).
	HTTPClient *http.Client
	// PageSize, when set, is the size of the listing's pages instead of
	// the largest the API allows (tests).
	PageSize int
}

// Client reads a provider's endpoint settings.
type Client interface {
	// Endpoints returns every endpoint the provider's API shows, every
	// page of them, this receiver's and others'.
	Endpoints(ctx context.Context) ([]Endpoint, error)
}

// Updater is a Client that can change an endpoint (--fix).
type Updater interface {
	// Update makes the changes ch asks of ep and returns the endpoint as
	// the API answers.
	Update(ctx context.Context, ep Endpoint, ch Change) (Endpoint, error)
}

// Change is what --fix changes of one endpoint.
type Change struct {
	// Enable re-enables it.
	Enable bool `json:"enable,omitempty"`
	// Events, when not nil, is the whole list of event types it is to be
	// subscribed to: what it had and the types it lacked.
	Events []string `json:"events,omitempty"`
	// Added are the types of Events it lacked, for the report.
	Added []string `json:"added,omitempty"`
	// Version, when set, is the API version it is to send in.
	Version string `json:"version,omitempty"`
}

// Creator is a Client that can create an endpoint (--create).
type Creator interface {
	// Create creates an endpoint that sends the event types to url,
	// pinned to version when it is set, and returns it with its signing
	// secret, which the API shows only now.
	Create(ctx context.Context, url string, types []string, version string) (Endpoint, string, error)
}

// ClientOf is a Client, an Updater and a Creator made of a provider's calls
// on its own type of endpoint T (a Stripe webhook endpoint, a Paddle
// notification setting): what the provider's answers are, Read makes them
// the check's.
type ClientOf[T any] struct {
	// List lists every endpoint the API shows (by List).
	List func(ctx context.Context) ([]T, error)
	// Read is an endpoint as the check reads it, with the problems the
	// provider's own rules find.
	Read func(T) Endpoint
	// Apply makes the changes ch asks of ep (Updater), and returns the
	// endpoint as the API answers.
	Apply func(ctx context.Context, ep Endpoint, ch Change) (T, error)
	// Add creates an endpoint (Creator), and returns it with its signing
	// secret.
	Add func(ctx context.Context, url string, types []string, version string) (T, string, error)
}

// Endpoints implements Client.
func (c ClientOf[T]) Endpoints(ctx context.Context) ([]Endpoint, error) {
	list, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, len(list))
	for i, v := range list {
		out[i] = c.Read(v)
	}
	return out, nil
}

// Update implements Updater.
func (c ClientOf[T]) Update(ctx context.Context, ep Endpoint, ch Change) (Endpoint, error) {
	v, err := c.Apply(ctx, ep, ch)
	if err != nil {
		return Endpoint{}, err
	}
	return c.Read(v), nil
}

// Create implements Creator.
func (c ClientOf[T]) Create(ctx context.Context, url string, types []string, version string) (Endpoint, string, error) {
	v, secret, err := c.Add(ctx, url, types, version)
	if err != nil {
		return Endpoint{}, "", err
	}
	return c.Read(v), secret, nil
}

// ValidID checks an endpoint's id, as a provider's API gave it, before a
// client puts it in the path of a request that changes the endpoint: 1 to
// 128 letters, digits, '_', '-' and '.', and not "." or "..".
func ValidID(id string) error {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return fmt.Errorf("endpoint id %q is not an id this receiver takes", reqlog.Untrusted(id, 64))
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("endpoint id %q is not an id this receiver takes", reqlog.Untrusted(id, 64))
		}
	}
	return nil
}

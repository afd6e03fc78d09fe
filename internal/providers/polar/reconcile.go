package polar

import (
	"errors"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of Polar's catch-up (server reconcile polar), the Spec's Vars
// (polar.go).
var (
	apiKey = webhooks.Var{
		Name: "POLAR_API_KEY",
		Doc: "a Polar organization access token for catching up on events the endpoint missed " +
			"(`server reconcile polar`, `RECONCILE_INTERVAL`), from the webhook endpoint's deliveries: the `webhooks:read` scope is enough",
		Secret: true,
		Check: func(v string) error {
			if len(v) < 16 || strings.ContainsAny(v, " \t\r\n") {
				return errors.New("is not a Polar access token")
			}
			return nil
		},
		Mask: func(v string) string {
			if strings.HasPrefix(v, "polar_oat_") {
				return "polar_oat_****"
			}
			return "****"
		},
	}
	apiBase = webhooks.Var{
		Name: "POLAR_API_BASE",
		Doc: "Polar's API base URL (`https://sandbox-api.polar.sh` for the sandbox): `https://`, " +
			"or `http://` to a loopback host (tests point it at a local server)",
		Default: DefaultAPIBase,
		Check:   reconcile.CheckAPIBase,
	}
	endpointID = webhooks.Var{
		Name: "POLAR_WEBHOOK_ENDPOINT_ID",
		Doc: "the id of the Polar webhook endpoint that posts to this receiver (Polar > Settings > Webhooks), " +
			"whose deliveries `server reconcile polar` reads: an organization's other endpoints send other webhook-ids",
		Check: checkUUID,
	}
)

// checkUUID accepts a UUID as Polar writes ids: 8-4-4-4-12 hex digits.
func checkUUID(v string) error {
	if len(v) != 36 {
		return errors.New("is not a UUID (8-4-4-4-12 hex digits)")
	}
	for i, c := range v {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return errors.New("is not a UUID (8-4-4-4-12 hex digits)")
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return errors.New("is not a UUID (8-4-4-4-12 hex digits)")
		}
	}
	return nil
}

// Reconciler catches up on Polar events the endpoint missed, from the
// endpoint's deliveries as Polar's API lists them (API.List), through the
// same processor and claims as a delivery (reconcile.Events), keyed on the
// same webhook-id: a delivered event is known, a missed one is processed
// once, with its body as Polar sent it. An event fetched over TLS with the
// access token needs no signature. The listing covers delivered events too
// (succeeded or not, Polar's deliveries are listed alike), which is what a
// database fail-over that lost acknowledged events needs. Events Polar never
// tried to deliver (skipped while the endpoint was disabled) have no
// delivery to list: see api.go.
//
// Polar lists deliveries by time only, so a run reads a closed window
// whole and leaves its end as the next run's start (Windowed), overlapping
// by a second: Polar's filters are strict at both ends (created after the
// start, before the end), and what the last run saw is known. Polar
// retries a failed delivery for about 35 minutes, so the periodic run
// finds what the endpoint missed once Polar has given up, or while it
// still retries.
var Reconciler = reconcile.Reconciler{
	Name:         "polar",
	Source:       Source,
	Flags:        []string{"since", "resume"},
	Unconfigured: reconcile.Requires(apiKey.Name, endpointID.Name),
	New: func(e reconcile.Env) (reconcile.Instance, error) {
		api, err := NewAPI(APIConfig{Token: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name),
			Endpoint: e.Settings.Env(endpointID.Name)})
		if err != nil {
			return nil, err
		}
		r := Events(api, e.Provider, e.Processor, reconcile.NewStore(e.Pool))
		r.Log = e.Log
		return r.Instance(), nil
	},
}

// Events returns the reconciliation of the Polar deliveries listed by api
// (an *API), handed to proc as deliveries of prov, with store's claims,
// cursors and runs.
func Events(api reconcile.Lister, prov webhooks.Provider, proc reconcile.Processor, store *reconcile.Store) *reconcile.Events {
	return &reconcile.Events{Source: Source, Lister: api, Decode: DecodeListed, Provider: prov, Processor: proc,
		Claims: store, Store: store, Windowed: true, Overlap: time.Second}
}

// DecodeListed is Decode of a listed webhook event.
func DecodeListed(l reconcile.Listed) (webhooks.Event, error) { return Decode(l.ID, l.Raw) }

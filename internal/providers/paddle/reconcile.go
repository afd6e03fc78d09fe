package paddle

import (
	"errors"
	"strings"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of Paddle's catch-up (server reconcile paddle), among the
// Spec's Vars (paddle.go).
var (
	apiKey = webhooks.Var{
		Name: "PADDLE_API_KEY",
		Doc: "a Paddle API key for catching up on events the notification destination missed " +
			"(`server reconcile paddle`, `RECONCILE_INTERVAL`): a key with the permission to read events is enough",
		Secret: true,
		Check: func(v string) error {
			if len(v) < 16 || strings.ContainsAny(v, " \t\r\n") {
				return errors.New("is not a Paddle API key")
			}
			return nil
		},
		Mask: func(v string) string {
			// pdl_live_apikey_…, pdl_sdbx_apikey_…: the mode may be shown.
			if i := strings.Index(v, "apikey_"); strings.HasPrefix(v, "pdl_") && i > 0 {
				return v[:i+len("apikey_")] + "****"
			}
			return "****"
		},
	}
	apiBase = webhooks.Var{
		Name: "PADDLE_API_BASE",
		Doc: "Paddle's API base URL (`https://sandbox-api.paddle.com` for the sandbox): `https://`, " +
			"or `http://` to a loopback host (tests point it at a local server)",
		Default: DefaultAPIBase,
		Check:   reconcile.CheckAPIBase,
	}
)

// Reconciler catches up on Paddle events the notification destination
// never received, from Paddle's List Events API (API.List), through the
// same processor and claims as a delivery (reconcile.Events). A listed
// event is the notification a delivery carries, less its notification_id:
// Decode reads it into the same webhooks.Event, keyed on its event_id, so
// a delivered event is known and a missed one is processed once; its
// stored body is its JSON object byte for byte as the API returned it. An
// event fetched over TLS with the API key needs no signature. The listing
// covers delivered events too (Paddle's API cannot tell them apart), which
// is what a database fail-over that lost acknowledged events needs.
var Reconciler = reconcile.Reconciler{
	Name:         "paddle",
	Source:       Source,
	Flags:        []string{"since", "resume", "types"},
	Unconfigured: reconcile.Requires(apiKey.Name),
	New: func(e reconcile.Env) (reconcile.Instance, error) {
		api, err := NewAPI(APIConfig{Key: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name)})
		if err != nil {
			return nil, err
		}
		r := Events(api, e.Provider, e.Processor, reconcile.NewStore(e.Pool))
		r.Log = e.Log
		return r.Instance(), nil
	},
}

// Events returns the reconciliation of Paddle's events listed by api (an
// *API), handed to proc as deliveries of prov, with store's claims,
// cursors and runs.
func Events(api reconcile.Lister, prov webhooks.Provider, proc reconcile.Processor, store *reconcile.Store) *reconcile.Events {
	return &reconcile.Events{Source: Source, Lister: api, Decode: DecodeListed, Provider: prov, Processor: proc,
		Claims: store, Store: store, PeriodicTypes: handledTypes}
}

// DecodeListed is Decode of a listed event's raw JSON.
func DecodeListed(l reconcile.Listed) (webhooks.Event, error) { return Decode(l.Raw) }

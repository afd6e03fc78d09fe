package fulfillment_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
)

// TestStepCarriesAccountAndMode: the call a fulfillment step makes says
// whose sale it is (account_id, a Stripe connected account) and in which
// mode (livemode), as the order in its payload records them; a payload
// stored before orders carried them, or of a provider that has neither,
// still runs, and says null for both.
func TestStepCarriesAccountAndMode(t *testing.T) {
	api := fulfillmenttest.NewServer(t)
	kind := fulfillment.Kind{Client: fulfillment.New(api.URL())}
	for _, c := range []struct {
		name, payload, want string
	}{
		{"a connected account's live sale",
			`{"order":{"id":7,"source":"stripe","external_id":"cs_live_1","amount_cents":3000,"currency":"usd","account_id":"acct_1A","livemode":true}}`,
			`{"order_id":7,"source":"stripe","external_id":"cs_live_1","amount_cents":3000,"currency":"usd","customer_email":"","account_id":"acct_1A","livemode":true}`},
		{"the platform's test sale",
			`{"order":{"id":8,"source":"stripe","external_id":"cs_test_1","amount_cents":3000,"currency":"usd","livemode":false}}`,
			`{"order_id":8,"source":"stripe","external_id":"cs_test_1","amount_cents":3000,"currency":"usd","customer_email":"","account_id":null,"livemode":false}`},
		{"a provider that says neither",
			`{"order":{"id":9,"source":"paddle","external_id":"txn_1","amount_cents":3000,"currency":"usd","livemode":null}}`,
			`{"order_id":9,"source":"paddle","external_id":"txn_1","amount_cents":3000,"currency":"usd","customer_email":"","account_id":null,"livemode":null}`},
		// As migration 3 and the receiver before issue 34 stored it.
		{"a payload stored before",
			`{"order":{"id":10,"source":"stripe","provider_event_id":"evt_1","external_id":"cs_test_2","status":"paid","amount_cents":3000,"currency":"usd","customer_email":"a@example.org","plan":"","account_id":"","amount_refunded_cents":0}}`,
			`{"order_id":10,"source":"stripe","external_id":"cs_test_2","amount_cents":3000,"currency":"usd","customer_email":"a@example.org","account_id":null,"livemode":null}`},
	} {
		if why := kind.Unavailable(json.RawMessage(c.payload)); why != "" {
			t.Errorf("%s: unavailable: %s", c.name, why)
			continue
		}
		if err := kind.Run(context.Background(), "evt_"+c.name+"/fulfillment", json.RawMessage(c.payload)); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		reqs := api.Requests()
		if got := string(reqs[len(reqs)-1].Raw); got != c.want {
			t.Errorf("%s: body\n %s\nwant\n %s", c.name, got, c.want)
		}
	}
}

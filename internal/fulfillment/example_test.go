package fulfillment_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	sw "github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// The fulfillment API's side, as docs/configuration.md shows it: any Standard
// Webhooks library verifies the receiver's calls, here the spec's own Go
// library, with the FULFILLMENT_SECRET the receiver signs with.
func Example_verifyingTheCalls() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // FULFILLMENT_SECRET, the receiver's and the API's

	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fulfillments", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil || r.Header.Get("webhook-id") != r.Header.Get("Idempotency-Key") {
			http.Error(w, "not signed by the receiver", http.StatusUnauthorized) // a 4xx: the receiver parks the step
			return
		}
		fmt.Println("verified", r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusCreated) // fulfil once per Idempotency-Key; 409 if already done
	})
	api := httptest.NewServer(mux)
	defer api.Close()

	// The receiver's side: FULFILLMENT_URL and FULFILLMENT_SECRET.
	key, _ := sw.ParseSecret(secret)
	c := fulfillment.New(api.URL)
	c.Key = key
	err = c.Fulfill(context.Background(), fulfillment.IdempotencyKey("evt_1/fulfillment"), fulfillment.Request{
		OrderID: 1, Source: "stripe", ExternalID: "cs_test_1", AmountCents: 3000, Currency: "usd"})
	fmt.Println("error:", err)

	c.Key = nil // unsigned
	err = c.Fulfill(context.Background(), fulfillment.IdempotencyKey("evt_2/fulfillment"), fulfillment.Request{OrderID: 2})
	fmt.Println("error:", err)
	// Output:
	// verified fulfil-55913761dcf688d4d3f85463b300e4c213300a19
	// error: <nil>
	// error: fulfillment: status 401: not signed by the receiver
}

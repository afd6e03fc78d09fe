package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// receiverOptions are the flags of -receiver.
type receiverOptions struct {
	on                bool
	fulfillmentStatus int    // what the development fulfillment API answers a new call with
	fulfillmentLog    string // where it records its calls
}

// devAdminAddr is where -receiver serves the console: loopback only.
const devAdminAddr = "127.0.0.1:8081"

// setUpReceiver starts what -receiver gives the receiver and returns the
// variables to add to its environment, and a function that stops what
// it started: the console's address and token, the development fulfillment
// API, each unless getenv says the developer set it. It prints where each
// is and how to reach the receiver, and the event types to enable at each
// provider (endpoints.Enable).
func setUpReceiver(cfg options, getenv func(string) string, stderr io.Writer) ([]string, func(), error) {
	var more []string
	stop := func() {}
	set := func(key, value string) { more = append(more, key+"="+value) }

	if getenv("FULFILLMENT_URL") == "" {
		secret := getenv(fulfillmentSecret.env)
		if secret == "" {
			secrets, err := loadDevSecrets(cfg.secretsFile)
			if err != nil {
				return nil, nil, err
			}
			secret = secrets[fulfillmentSecret.env]
			set(fulfillmentSecret.env, secret)
		}
		verify, err := fulfillmentVerifier(secret)
		if err != nil {
			return nil, nil, err
		}
		api, err := openFulfillmentAPI(cfg.receiver.fulfillmentLog, cfg.receiver.fulfillmentStatus, stderr)
		if err != nil {
			return nil, nil, err
		}
		api.verify = verify
		base, stopAPI, err := serveFulfillmentAPI(api, "")
		if err != nil {
			_ = api.Close()
			return nil, nil, err
		}
		stop = stopAPI
		set("FULFILLMENT_URL", base)
		fmt.Fprintf(stderr, "Fulfillment API: FULFILLMENT_URL=%s (development: answers %d, checks each call's signature "+
			"(FULFILLMENT_SECRET), records it in %s and prints it here)\n", base, cfg.receiver.fulfillmentStatus, cfg.receiver.fulfillmentLog)
	} else {
		fmt.Fprintf(stderr, "FULFILLMENT_URL is already set: fulfillment calls go to %s\n", getenv("FULFILLMENT_URL"))
	}

	adminAddr := getenv("ADMIN_ADDR")
	if adminAddr == "" {
		adminAddr = devAdminAddr
		set("ADMIN_ADDR", adminAddr)
	}
	token := "your ADMIN_TOKEN"
	if getenv("ADMIN_TOKEN") == "" {
		secrets, err := loadDevSecrets(cfg.secretsFile)
		if err != nil {
			stop()
			return nil, nil, err
		}
		token = secrets[adminToken.env]
		set(adminToken.env, token)
	}
	fmt.Fprintf(stderr, "Console: %s (sign in with %s; ADMIN_TOKEN, kept in %s)\n", webURL(adminAddr), token, cfg.secretsFile)

	httpAddr := getenv("HTTP_ADDR")
	if httpAddr == "" {
		httpAddr = config.DefaultHTTPAddr
	}
	base := strings.TrimSuffix(webURL(httpAddr), "/")
	var routes []string
	for _, s := range providers.All() {
		if getenv(s.Secret.Name) != "" || s.Secret.DevPrefix != "" {
			routes = append(routes, base+s.Route())
		}
	}
	fmt.Fprintf(stderr, "Webhook routes: %s\n", strings.Join(routes, ", "))
	fmt.Fprint(stderr, providers.Enable())
	fmt.Fprintln(stderr, "From another terminal: eval \"$(bin/dev env)\" sets DATABASE_URL and the secrets this receiver runs with, then")
	fmt.Fprintln(stderr, "  bin/server events list")
	fmt.Fprintln(stderr, "  bin/loadgen -event checkout -count 1 -concurrency 1 -progress=false   # a signed test checkout")
	return more, stop, nil
}

// webURL is the http:// URL of a listen address: a host of every
// interface (":8080", "0.0.0.0:8080") is reached as localhost.
func webURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + "/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// fulfillmentVerifier returns the check of a fulfillment call's Standard
// Webhooks signature (webhook-id, webhook-timestamp, webhook-signature)
// made with secret, which also holds the signed webhook-id to the call's
// Idempotency-Key, as the contract says (docs/fulfillment-api.md).
func fulfillmentVerifier(secret string) (func(h http.Header, body []byte) error, error) {
	v, err := standardwebhooks.NewVerifier(secret)
	if err != nil {
		return nil, fmt.Errorf("FULFILLMENT_SECRET: %w", err)
	}
	return func(h http.Header, body []byte) error {
		m, err := v.Verify(h, body, time.Now())
		if err != nil {
			return err
		}
		if m.ID != h.Get("Idempotency-Key") {
			return errors.New("webhook-id is not the Idempotency-Key")
		}
		return nil
	}, nil
}

package server

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/paywebhooks/receiver/internal/checkout"
	"github.com/paywebhooks/receiver/internal/portal"
)

// buyerRoute is a GET route of HTTP_ADDR that a buyer's browser reaches
// (the return from checkout, the billing-portal link): public and unsigned,
// each bounded by its handler.
type buyerRoute struct {
	path string
	h    http.Handler
}

// setupCheckout mounts GET /checkout/return when p, the provider that
// offers it (registry.Provider.Checkout), has its success URL and what reads a session
// (CHECKOUT_SUCCESS_URL and STRIPE_API_KEY), and says why not when only
// the first is set. The returns still processing at shutdown are waited
// for before the pool closes.
func (s *Server) setupCheckout(p checkout.Provider) error {
	sessions, success, off, err := p.Setup(s.cfg.Settings(p.Source))
	switch {
	case err != nil:
		return err
	case off != "":
		s.log.Warn("checkout return route not mounted: " + off)
		return nil
	case sessions == nil:
		return nil
	}
	h := checkout.New(checkout.Config{
		Sessions:       sessions,
		SuccessURL:     success,
		Processor:      s.proc,
		ProcessTimeout: s.proc.DeliveryTimeout(),
		Orders:         s.pool,
		ClientIP:       ipExtractor(s.cfg.TrustedProxies),
		Log:            s.log,
		Registerer:     s.registry,
	})
	s.buyer = append(s.buyer, buyerRoute{path: checkout.Route, h: h})
	s.background = append(s.background, func(ctx context.Context) {
		<-ctx.Done()
		wctx, cancel := context.WithTimeout(context.Background(), s.proc.DeliveryTimeout())
		defer cancel()
		h.Wait(wctx)
	})
	s.log.Info("checkout return route mounted", "route", checkout.Route)
	return nil
}

// setupPortal mounts GET /billing/portal when the emails carry billing-portal
// links: PORTAL_LINK_SECRET, PUBLIC_URL and a provider with a portal whose
// API key is set (the same test as the email steps', wiring.StepKinds).
func (s *Server) setupPortal(ps []portal.Provider) error {
	keys, openers, off, err := portal.Setup(s.cfg.PortalSettings(), ps)
	switch {
	case err != nil:
		return err
	case off != "":
		s.log.Warn("billing portal links off: " + off)
		return nil
	case keys == nil:
		return nil
	}
	h := portal.New(portal.Config{Keys: keys, Openers: openers, Uses: s.cfg.Portal.Uses, ReturnURL: s.cfg.Portal.ReturnURL,
		DB: s.pool, ClientIP: ipExtractor(s.cfg.TrustedProxies), Log: s.log, Registerer: s.registry})
	s.buyer = append(s.buyer, buyerRoute{path: portal.Route, h: h})
	sources := make([]string, 0, len(openers))
	for source := range openers {
		sources = append(sources, source)
	}
	slices.Sort(sources)
	s.log.Info("billing portal links on", "route", portal.Route, "providers", strings.Join(sources, ","))
	return nil
}

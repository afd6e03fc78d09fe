package server

import (
	"context"
	"net/http"

	"github.com/paywebhooks/receiver/internal/checkout"
)

// buyerRoute is a GET route of HTTP_ADDR that a buyer's browser reaches
// (the return from checkout, the billing-portal link): public and unsigned,
// each bounded by its handler.
type buyerRoute struct {
	path string
	h    http.Handler
}

// setupCheckout mounts GET /checkout/return when the provider of the
// registry's checkout line has its success URL and what reads a session
// (CHECKOUT_SUCCESS_URL and STRIPE_API_KEY), and says why not when only
// the first is set. The returns still processing at shutdown are waited
// for before the pool closes.
func (s *Server) setupCheckout(p *checkout.Provider) error {
	if p == nil {
		return nil
	}
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

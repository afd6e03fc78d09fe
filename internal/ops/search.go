package ops

import (
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Search finds events by any id an operator holds, or a customer's email,
// with index look-ups only, however many events are stored:
//
//   - an event's key, or the provider's id of it where that differs (a
//     GitHub delivery GUID); a step's key finds its event;
//   - an order's business key (a Checkout Session cs_…, a Paddle
//     transaction txn_…, a marketplace account "account:<id>", a
//     sponsorship node id), its payment intent (pi_…) or its customer's
//     email: the event that created the order, and the events whose
//     transaction changed it since (an order's created_at and updated_at
//     are its writer's now(), which is also the claimed_at of the event
//     that transaction claimed);
//   - a refund's payment intent: the refund's event;
//   - a subscription (sub_…, a Paddle or Polar subscription id), a dispute
//     (dp_…) or a customer (cus_…, ctm_…): the last event applied to it;
//   - an invoice (in_…) or its customer's email: the events that created
//     it, last changed it (the same timestamps, checked against the body)
//     or recorded a failed payment of it;
//   - and, for any text of at least SearchMinBody characters, the bodies
//     of every event that waits for an operator (parked, or a step not
//     done: few, from their partial indexes) and of the newest
//     SearchRecentBodies events.
//
// Bodies are not indexed: an index on an id inside each body costs every
// new event a JSON parse (see migrations/000005).
const (
	SearchRecentBodies = 2000
	SearchMinBody      = 4
	searchMaxRows      = 500
)

// searchSQL is the query of Filter.Query: a list of event keys ("key").
func searchSQL(b *sqlBuilder, query string, specs []webhooks.Spec) string {
	var orderSources, ofProvider, sources []string
	for _, s := range specs {
		sources = append(sources, s.Source)
		for _, src := range s.OrderSources {
			orderSources = append(orderSources, src)
			ofProvider = append(ofProvider, s.Source)
		}
	}
	q := b.arg(query) + "::text"
	osrc := b.arg(orderSources) + "::text[]"
	ps := b.arg(ofProvider) + "::text[]"
	srcs := b.arg(sources) + "::text[]"
	limit := b.arg(searchMaxRows)
	recent := b.arg(SearchRecentBodies)
	minBody := b.arg(SearchMinBody)
	return `
    WITH o AS MATERIALIZED (
        SELECT o.source, o.provider_event_id, o.created_at, o.updated_at FROM orders o
        WHERE (o.source = ANY(` + osrc + `) AND o.external_id = ` + q + `)
           OR o.payment_intent_id = ` + q + ` OR lower(o.customer_email) = lower(` + q + `)
        LIMIT ` + limit + `),
    i AS MATERIALIZED (
        SELECT stripe_invoice_id, created_at, updated_at FROM invoices
        WHERE stripe_invoice_id = ` + q + ` OR lower(customer_email) = lower(` + q + `)
        LIMIT ` + limit + `),
    ids AS (
        SELECT ` + q + ` AS id
        UNION SELECT provider_event_id FROM o
        UNION (SELECT provider_event_id FROM refunds WHERE payment_intent_id = ` + q + ` LIMIT ` + limit + `)
        UNION (SELECT provider_event_id FROM invoice_payment_failures
               WHERE stripe_invoice_id IN (SELECT stripe_invoice_id FROM i) LIMIT ` + limit + `)
        UNION (SELECT provider_event_id FROM subscriptions WHERE source = ANY(` + srcs + `) AND external_id = ` + q + `)
        UNION (SELECT provider_event_id FROM disputes WHERE source = ANY(` + srcs + `) AND external_id = ` + q + `)
        UNION (SELECT provider_event_id FROM customers WHERE source = ANY(` + srcs + `) AND customer_id = ` + q + `)),
    waiting AS (
        SELECT coalesce(parent_key, event_key) AS key FROM processed_events WHERE status = 'parked'
        UNION SELECT parent_key FROM processed_events WHERE kind = 'step' AND status = 'in_progress'),
    recent AS (
        SELECT event_key, body FROM processed_events WHERE kind = 'event'
        ORDER BY claimed_at DESC, event_key DESC LIMIT ` + recent + `)
    SELECT e.event_key AS key FROM ids JOIN processed_events e ON e.event_key = ids.id AND e.kind = 'event'
    UNION
    SELECT e.event_key FROM ids JOIN processed_events e
        ON e.event_id = ids.id AND e.kind = 'event' AND e.event_id <> e.event_key
    UNION
    SELECT parent_key FROM processed_events WHERE event_key = ` + q + ` AND kind = 'step'
    UNION
    SELECT e.event_key FROM o
    JOIN unnest(` + osrc + `, ` + ps + `) AS m(order_source, source) ON m.order_source = o.source
    JOIN processed_events e ON e.kind = 'event' AND e.source = m.source
        AND e.claimed_at IN (o.created_at, o.updated_at)
    UNION
    SELECT e.event_key FROM i
    JOIN processed_events e ON e.kind = 'event' AND e.claimed_at IN (i.created_at, i.updated_at)
        AND position(convert_to(i.stripe_invoice_id, 'UTF8') IN e.body) > 0
    UNION
    SELECT e.event_key FROM waiting w JOIN processed_events e ON e.event_key = w.key AND e.kind = 'event'
    WHERE length(` + q + `) >= ` + minBody + ` AND position(convert_to(` + q + `, 'UTF8') IN e.body) > 0
    UNION
    SELECT r.event_key FROM recent r
    WHERE length(` + q + `) >= ` + minBody + ` AND position(convert_to(` + q + `, 'UTF8') IN r.body) > 0`
}

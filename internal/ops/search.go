package ops

import (
	"strings"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Search finds events by any id an operator holds, or a customer's email,
// with index look-ups only, however many events are stored:
//
//   - an event's key, or the provider's id of it where that differs (a
//     GitHub delivery GUID); a step's key finds its event;
//   - whatever the owners of the business rows find through their indexes
//     (Owner.Search): the events their rows name, and the events whose
//     transaction wrote them. Of the receiver's own: an order's business
//     key (a Checkout Session cs_…, a Paddle transaction txn_…, a
//     marketplace account "account:<id>", a sponsorship node id), its
//     payment intent (pi_…) or its customer's email finds the event that
//     created the order and the events whose transaction changed it since
//     (an order's created_at and updated_at are its writer's now(), which
//     is also the claimed_at of the event that transaction claimed); a
//     refund's payment intent, the refund's event; a subscription (sub_…,
//     a Paddle or Polar subscription id), a dispute (dp_…) or a customer
//     (cus_…, ctm_…), the last event applied to it; a Stripe invoice (in_…)
//     or its customer's email, the events that created it, last changed it
//     (the same timestamps, checked against the body) or recorded a failed
//     payment of it;
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

// Term is a search as an owner adds to its query: the placeholders of the
// query's arguments, and the providers.
type Term struct {
	b       *sqlBuilder
	specs   []webhooks.Spec
	text    string
	limit   string
	sources string
}

// Text is the placeholder of the text searched for ($n::text).
func (t *Term) Text() string { return t.text }

// Limit is the placeholder of the most rows one look-up reads.
func (t *Term) Limit() string { return t.limit }

// Specs are the providers.
func (t *Term) Specs() []webhooks.Spec { return t.specs }

// Sources is the placeholder of the providers' sources ($n::text[]).
func (t *Term) Sources() string {
	if t.sources == "" {
		var sources []string
		for _, s := range t.specs {
			sources = append(sources, s.Source)
		}
		t.sources = t.b.arg(sources) + "::text[]"
	}
	return t.sources
}

// Arg is the placeholder of one more argument, v.
func (t *Term) Arg(v any) string { return t.b.arg(v) }

// LastEventOf is the search of an owner whose rows record the last event
// applied to them (provider_event_id): the row of one of the providers'
// sources whose column idColumn is the text. table and idColumn are the
// owner's own names, never input.
func (t *Term) LastEventOf(table, idColumn string) Search {
	return Search{IDs: []string{`SELECT provider_event_id FROM ` + table + ` WHERE source = ANY(` + t.Sources() +
		`) AND ` + idColumn + ` = ` + t.Text()}}
}

// Search is what an owner adds to the query of a search, each part a
// look-up of its own indexes.
type Search struct {
	// With are common table expressions ("name AS MATERIALIZED (…)") of
	// rows the parts below read; each name starts with the owner's Name.
	With []string
	// IDs are SELECTs of one text column: an event's key, or the
	// provider's id of an event.
	IDs []string
	// Keys are SELECTs of one text column: keys of events found otherwise
	// (the events whose transaction wrote a row, by its timestamps).
	Keys []string
}

// searchSQL is the query of Filter.Query: a list of event keys ("key").
func searchSQL(b *sqlBuilder, query string, specs []webhooks.Spec, owners []Owner) string {
	t := &Term{b: b, specs: specs, text: b.arg(query) + "::text", limit: b.arg(searchMaxRows)}
	var with, ids, keys []string
	for _, o := range owners {
		s := o.Search(t)
		with = append(with, s.With...)
		ids = append(ids, s.IDs...)
		keys = append(keys, s.Keys...)
	}
	q := t.Text()
	recent := b.arg(SearchRecentBodies)
	minBody := b.arg(SearchMinBody)
	var sql strings.Builder
	sql.WriteString("\n    WITH ")
	for _, w := range with {
		sql.WriteString(w + ",\n    ")
	}
	sql.WriteString(`ids AS (
        SELECT ` + q + ` AS id`)
	for _, s := range ids {
		sql.WriteString("\n        UNION (" + s + ")")
	}
	sql.WriteString(`),
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
    SELECT parent_key FROM processed_events WHERE event_key = ` + q + ` AND kind = 'step'`)
	for _, s := range keys {
		sql.WriteString("\n    UNION\n    " + s)
	}
	sql.WriteString(`
    UNION
    SELECT e.event_key FROM waiting w JOIN processed_events e ON e.event_key = w.key AND e.kind = 'event'
    WHERE length(` + q + `) >= ` + minBody + ` AND position(convert_to(` + q + `, 'UTF8') IN e.body) > 0
    UNION
    SELECT r.event_key FROM recent r
    WHERE length(` + q + `) >= ` + minBody + ` AND position(convert_to(` + q + `, 'UTF8') IN r.body) > 0`)
	return sql.String()
}

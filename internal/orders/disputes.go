package orders

// disputeLostSQL is true when a dispute of source's payment intent (the
// expressions source and pi) is lost: its money went back to the
// cardholder. The disputes are internal/disputes' rows; a dispute won, or
// still open, marks nothing.
func disputeLostSQL(source, pi string) string {
	return `EXISTS (SELECT 1 FROM disputes d WHERE d.source = ` + source + ` AND d.payment_intent_id = ` + pi +
		` AND d.status = 'lost')`
}

// FollowDisputes marks the orders of source's payment intent dispute_lost
// while one of its disputes is lost, and clears the mark once none is (a
// dispute won): queued after the dispute's own write (internal/disputes),
// in the same transaction. An order created later starts marked (Create,
// Upsert), so a dispute that arrives before its order marks it too. The
// payment intent's lock, which an order's insert takes too, makes sure one
// of the two transactions sees the other's row.
func FollowDisputes(q Queue, source, paymentIntentID string) {
	if paymentIntentID == "" {
		return
	}
	lock(q, "payment_intent:"+paymentIntentID)
	q.Exec(`
UPDATE orders o SET dispute_lost = t.lost, updated_at = now()
FROM (SELECT `+disputeLostSQL("$1", "$2")+` AS lost) AS t
WHERE receiver_claimed() AND o.source = $1 AND o.payment_intent_id = $2 AND o.dispute_lost <> t.lost`,
		source, paymentIntentID)
}

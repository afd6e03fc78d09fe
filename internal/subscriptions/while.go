package subscriptions

// NoticeWhile is Notice, recorded only while the subscription's row (as
// this transaction leaves it) is in status: a past-due notice is given for
// a subscription the event left past due, not for one a newer event has
// already made active again (a late delivery), and such a late event
// records nothing, so the notice is still there to give should the
// subscription fall past due in that period after all.
func NoticeWhile(q Queue, source, subscriptionID, notice, eventID, status string) {
	q.Exec(`
INSERT INTO subscription_notices (source, subscription_id, notice, provider_event_id)
SELECT $1, $2, $3, $4 WHERE receiver_claimed()
  AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.source = $1 AND s.external_id = $2 AND s.status = $5)
ON CONFLICT DO NOTHING`, source, subscriptionID, notice, eventID, status)
}

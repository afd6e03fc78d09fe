package paddle

import (
	"strings"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Fields are the fields of a decoded notification the handlers read, by
// their names in Paddle's payload.
func Fields(ev webhooks.Event) map[string]string {
	n := ev.Payload.(*notification)
	d := n.Data
	f := map[string]string{"event_id": n.EventID, "event_type": n.EventType, "id": d.ID, "status": d.Status,
		"currency_code": d.CurrencyCode, "custom_data.email": d.CustomData.Email, "action": d.Action,
		"transaction_id": d.TransactionID}
	if d.Details != nil && d.Details.Totals != nil {
		f["details.totals.grand_total"] = d.Details.Totals.GrandTotal
	}
	if len(d.Payments) > 0 && d.Payments[0].ErrorCode != nil {
		f["payments[0].error_code"] = *d.Payments[0].ErrorCode
	}
	if d.Totals != nil {
		f["totals.total"] = d.Totals.Total
	}
	if strings.HasPrefix(n.EventType, "subscription.") {
		f["customer_id"] = d.CustomerID
		if d.CurrentBillingPeriod != nil {
			f["current_billing_period.ends_at"] = d.CurrentBillingPeriod.EndsAt
		}
		if d.ScheduledChange != nil {
			f["scheduled_change.action"] = d.ScheduledChange.Action
		}
	}
	return f
}

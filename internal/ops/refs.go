package ops

import (
	"encoding/json"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
)

// StepRefs returns what a step sends outside that is the same on every
// attempt, for an operator to find downstream: a fulfillment step's
// Idempotency-Key, an email step's Message-ID. An email step carries the
// domain of its Message-ID from when it was planned; mailDomain is the
// process's (MAIL_FROM's), for steps planned before they carried one ("":
// no Message-ID is given for those).
func StepRefs(c Claim, mailDomain string) (idempotencyKey, messageID string) {
	switch c.StepKind {
	case fulfillment.KindFulfillment:
		return fulfillment.IdempotencyKey(c.Key), ""
	case mail.KindEmail:
		var e struct {
			Domain string `json:"message_id_domain"`
		}
		_ = json.Unmarshal(c.Payload, &e)
		if e.Domain == "" {
			e.Domain = mailDomain
		}
		if e.Domain == "" {
			return "", ""
		}
		return "", mail.MessageID(c.Key, e.Domain)
	}
	return "", ""
}

package providers

import (
	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// StepKinds returns the step kinds the receiver runs, by the name a Step
// carries, built from the configuration: the server, `events replay` and
// `reconcile` all use it, so a kind a fork adds is one line here.
func StepKinds(cfg config.Config) webhooks.StepKinds {
	var sender mail.Sender = mail.FileSender{Dir: cfg.MailDir}
	if cfg.SMTPAddr != "" {
		sender = mail.SMTPSender{Addr: cfg.SMTPAddr, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, TLS: cfg.SMTPTLS}
	}
	var client *fulfillment.Client
	if cfg.FulfillmentURL != "" {
		client = fulfillment.New(cfg.FulfillmentURL)
	}
	return webhooks.StepKinds{
		mail.KindEmail:              mail.Kind{Sender: sender, From: cfg.MailFrom, Domain: cfg.MailDomain()},
		fulfillment.KindFulfillment: fulfillment.Kind{Client: client},
	}
}

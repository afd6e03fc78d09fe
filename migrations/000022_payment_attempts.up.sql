-- What each reported payment attempt of a Stripe invoice was: 'failed'
-- (invoice.payment_failed) or 'action_required' (invoice.payment_action_required:
-- the bank wants the customer to confirm it, 3-D Secure). One row per event,
-- as before; the attempt's email is a step of the attempt
-- ("invoice:<id>:attempt:<n>", uq_steps_object), so that two events of one
-- attempt send it once, and the receipt of an invoice paid after such a row
-- says the payment went through after all.
ALTER TABLE invoice_payment_failures
    ADD COLUMN outcome TEXT NOT NULL DEFAULT 'failed' CHECK (outcome IN ('failed', 'action_required'));

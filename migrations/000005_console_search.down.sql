DROP INDEX IF EXISTS invoice_payment_failures_invoice_idx;
DROP INDEX IF EXISTS invoices_customer_email_idx;
DROP INDEX IF EXISTS orders_customer_email_idx;
DROP INDEX IF EXISTS processed_events_source_idx;

DELETE FROM invoice_payment_failures WHERE outcome <> 'failed';
ALTER TABLE invoice_payment_failures DROP COLUMN IF EXISTS outcome;

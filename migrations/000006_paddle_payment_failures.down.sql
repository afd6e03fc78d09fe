DROP TABLE IF EXISTS paddle_payment_failures;

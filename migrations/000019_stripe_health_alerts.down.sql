DROP TABLE IF EXISTS stripe_health_alerts;

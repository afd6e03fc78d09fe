DROP TABLE IF EXISTS receivers_salt;
DROP TABLE IF EXISTS receivers;

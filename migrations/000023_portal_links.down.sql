DROP TABLE IF EXISTS portal_link_uses;

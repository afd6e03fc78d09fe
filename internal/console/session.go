package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Sign-in sessions live in PostgreSQL (console_sessions, migration 7), so
// that every replica sees a sign-out: the cookie is "s2.<id>.<mac>", a
// random 256-bit id and an HMAC of it under a key derived from
// ADMIN_TOKEN, and the row of the id's SHA-256 says until when it holds
// and whether it was revoked. The HMAC is checked first, so a made-up
// cookie costs no query; changing ADMIN_TOKEN signs everyone out.
const (
	sqlSessionCreate = `INSERT INTO console_sessions (id_hash, created_at, expires_at, client) VALUES ($1, $2, $3, $4)`
	sqlSessionLive   = `SELECT EXISTS (SELECT 1 FROM console_sessions
	WHERE id_hash = $1 AND revoked_at IS NULL AND expires_at > $2)`
	sqlSessionRevoke = `UPDATE console_sessions SET revoked_at = $2 WHERE id_hash = $1 AND revoked_at IS NULL`
	// Expired sessions, revoked or not, are of no further use.
	sqlSessionsExpire = `DELETE FROM console_sessions WHERE expires_at <= $1`
)

// sessions reads and writes console_sessions.
type sessions struct {
	db webhooks.Querier
}

// sessionID is the random part of a session cookie.
type sessionID [32]byte

func (id sessionID) hash() []byte {
	h := sha256.Sum256(id[:])
	return h[:]
}

// create stores a new session for client, valid until expires, and
// deletes the expired ones (sign-ins are rare, so this keeps the table
// to the sessions of the last sessionTTL).
func (s sessions) create(ctx context.Context, now, expires time.Time, client string) (sessionID, error) {
	var id sessionID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("session id: %w", err)
	}
	if _, err := s.db.Exec(ctx, sqlSessionCreate, id.hash(), now, expires, client); err != nil {
		return id, fmt.Errorf("insert console session: %w", err)
	}
	return id, nil
}

// expire deletes the sessions expired at now.
func (s sessions) expire(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, sqlSessionsExpire, now)
	if err != nil {
		return 0, fmt.Errorf("delete expired console sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// live reports whether the session may open pages at now: stored, not
// revoked, not expired.
func (s sessions) live(ctx context.Context, id sessionID, now time.Time) (bool, error) {
	var ok bool
	if err := s.db.QueryRow(ctx, sqlSessionLive, id.hash(), now).Scan(&ok); err != nil {
		return false, fmt.Errorf("read console session: %w", err)
	}
	return ok, nil
}

// revoke ends the session: its cookie opens nothing from now on, on any
// replica.
func (s sessions) revoke(ctx context.Context, id sessionID, now time.Time) error {
	if _, err := s.db.Exec(ctx, sqlSessionRevoke, id.hash(), now); err != nil {
		return fmt.Errorf("revoke console session: %w", err)
	}
	return nil
}

const cookiePrefix = "s2."

// cookieValue is the session cookie of id.
func (a auth) cookieValue(id sessionID) string {
	payload := cookiePrefix + base64.RawURLEncoding.EncodeToString(id[:])
	return payload + "." + a.sign(payload)
}

var errBadCookie = errors.New("not a session cookie of this console")

// sessionIDOf checks a cookie value's form and HMAC, and returns its id.
func (a auth) sessionIDOf(v string) (sessionID, error) {
	var id sessionID
	const idLen = len(cookiePrefix) + 43 // 32 bytes in unpadded base64
	if len(v) < idLen+1 || v[:len(cookiePrefix)] != cookiePrefix || v[idLen] != '.' {
		return id, errBadCookie
	}
	payload, mac := v[:idLen], v[idLen+1:]
	if !a.verify(payload, mac) {
		return id, errBadCookie
	}
	b, err := base64.RawURLEncoding.DecodeString(payload[len(cookiePrefix):])
	if err != nil || len(b) != len(id) {
		return id, errBadCookie
	}
	copy(id[:], b)
	return id, nil
}

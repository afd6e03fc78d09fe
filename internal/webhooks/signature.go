package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
)

// Signatures are the HMAC-SHA256 signatures a delivery presents, decoded
// from its header (hex, base64: the provider's business): usually one,
// more while the sender signs with a secret being rolled and its
// successor. Every provider matches them with Match (or MatchKeys), so
// that the rule is written once: every presented signature is compared
// with the MAC of every configured secret, each comparison in constant
// time (hmac.Equal), and the answer is the position of the secret that
// matched, which Event.SecretIndex carries to the
// webhook_secret_matches_total metric.
//
// A presented signature of another length than a SHA-256 MAC matches
// nothing; a provider need not filter them out.
type Signatures [][]byte

// Match returns the position in secrets of the first secret whose
// HMAC-SHA256, keyed with the secret's bytes, of what write writes equals
// one of s; -1 when none does, or s is empty. write writes the content the
// sender signs (Stripe: "<t>.<body>") to the MAC it is given; it is called
// once per secret tried and must write the same bytes each time.
//
// Only which secret matched is learnt from the time Match takes, never how
// much of a signature was right.
func (s Signatures) Match(secrets []string, write func(mac hash.Hash)) int {
	if len(s) == 0 {
		return -1
	}
	var sum [sha256.Size]byte
	for i, secret := range secrets {
		if s.matches(sum[:0], []byte(secret), write) {
			return i
		}
	}
	return -1
}

// MatchKeys is Match for secrets that each stand for several candidate
// keys: keys[i] are the keys secret i may sign with, for a sender whose
// keying of a secret cannot be told from its text (Polar keys a whsec_
// secret with its base64-decoded part, or with the UTF-8 bytes of the
// whole string, depending on when it was made). It returns the position
// of the secret and of its key that matched, or -1, -1.
func (s Signatures) MatchKeys(keys [][][]byte, write func(mac hash.Hash)) (secret, key int) {
	if len(s) == 0 {
		return -1, -1
	}
	var sum [sha256.Size]byte
	for i, candidates := range keys {
		for j, k := range candidates {
			if s.matches(sum[:0], k, write) {
				return i, j
			}
		}
	}
	return -1, -1
}

// matches reports whether the HMAC-SHA256 keyed with key of what write
// writes equals one of s. Every signature is compared, matched or not.
func (s Signatures) matches(buf, key []byte, write func(hash.Hash)) bool {
	mac := hmac.New(sha256.New, key)
	write(mac)
	want := mac.Sum(buf)
	ok := false
	for _, got := range s {
		if hmac.Equal(want, got) {
			ok = true
		}
	}
	return ok
}

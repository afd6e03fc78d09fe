package portal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Claims are what a link's token says: whose portal it opens, until when,
// and its id (the random nonce it was sealed with), by which its uses are
// counted.
type Claims struct {
	Source   string    // the provider: stripe, paddle, polar
	Customer string    // its customer id
	Account  string    // a Stripe connected account; ""
	Expires  time.Time // to the second
	ID       []byte    // the token's nonce
}

// sealed is the claims as they are encrypted.
type sealed struct {
	S string `json:"s"`
	C string `json:"c"`
	A string `json:"a,omitempty"`
	E int64  `json:"e"`
}

// Keys seal and open tokens: AES-256-GCM, the first key seals, every key
// opens. A token is base64url(version ‖ nonce ‖ ciphertext ‖ tag), with the
// version and a fixed label authenticated beside the claims: nobody
// without a key reads the customer id in it, nor makes or changes one.
type Keys struct {
	aeads []cipher.AEAD
}

// tokenVersion is the first byte of every token; label is authenticated
// with it, so that a token of another use of the same key never opens.
const (
	tokenVersion = 1
	label        = "paywebhooks billing-portal link v1"
	// MaxToken bounds a token's length: anything longer is not one, and
	// is refused before it is decoded.
	MaxToken = 512
)

// NewKeys returns the keys of PORTAL_LINK_SECRET, each 32 bytes.
func NewKeys(keys [][]byte) (*Keys, error) {
	if len(keys) == 0 {
		return nil, errors.New("portal: no key")
	}
	k := &Keys{}
	for i, key := range keys {
		block, err := aes.NewCipher(key)
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("portal: key %d: want 32 bytes", i+1)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.aeads = append(k.aeads, aead)
	}
	return k, nil
}

// Seal returns the token of c, sealed with the first key under a fresh
// random nonce (c.ID is ignored).
func (k *Keys) Seal(c Claims) (string, error) {
	plain, err := json.Marshal(sealed{S: c.Source, C: c.Customer, A: c.Account, E: c.Expires.Unix()})
	if err != nil {
		return "", err
	}
	aead := k.aeads[0]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := append([]byte{tokenVersion}, nonce...)
	out = aead.Seal(out, nonce, plain, ad())
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// ErrForged is a token no key opens: made up, changed, truncated, or
// sealed with a key that has been dropped.
var ErrForged = errors.New("not a link this receiver made")

// Open returns the claims of token, or ErrForged.
func (k *Keys) Open(token string) (Claims, error) {
	if len(token) > MaxToken {
		return Claims{}, ErrForged
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 1 || raw[0] != tokenVersion {
		return Claims{}, ErrForged
	}
	for _, aead := range k.aeads {
		ns := aead.NonceSize()
		if len(raw) < 1+ns+aead.Overhead() {
			return Claims{}, ErrForged
		}
		nonce := raw[1 : 1+ns]
		plain, err := aead.Open(nil, nonce, raw[1+ns:], ad())
		if err != nil {
			continue
		}
		var s sealed
		if err := json.Unmarshal(plain, &s); err != nil || s.S == "" || s.C == "" {
			return Claims{}, ErrForged
		}
		return Claims{Source: s.S, Customer: s.C, Account: s.A, Expires: time.Unix(s.E, 0), ID: append([]byte(nil), nonce...)}, nil
	}
	return Claims{}, ErrForged
}

// ad is the data authenticated beside the claims.
func ad() []byte { return append([]byte{tokenVersion}, label...) }

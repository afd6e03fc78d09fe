package config

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
)

// A Fingerprint is what a receiver's steps (and its catch-ups) use from
// its configuration: where mail goes and from whom, the fulfillment API and
// whether its calls are signed with which key, where alerts go, the
// leases, and every provider's settings. Each receiver records its own
// (internal/server's heartbeat); an operator command that runs steps
// computes its shell's the same way and compares the two, so that it
// refuses only a shell that really differs from the running receivers and
// can say how. internal/wiring lists what goes in it
// (wiring.Setup.Fingerprint), through a Fingerprinter.
//
// A secret is never in it, nor anything that gives it away cheaply: a
// secret (and a URL that carries credentials) is recorded as a keyed, slow
// hash, PBKDF2-HMAC-SHA256 with FingerprintIterations rounds, keyed by a
// random salt of the database's own (receivers_salt) and cut to 8 bytes.
// The salt makes the hashes of one database say nothing about another's
// and rules out precomputed tables. Someone who can read the table can
// read the salt too, and test guesses: the rounds make each guess cost
// 200,000 HMACs (a third of what OWASP asks of stored passwords), so that
// a secret a provider issued (random, 128 bits and more) cannot be found
// from it, and a weak one a person chose (a GitHub webhook secret, a
// password in a URL) is about as costly to guess as a stored password.
// SMTP_PASSWORD, which people choose, is not recorded at all: a wrong one
// fails the email step, which is retried, and sends nothing anywhere else.
type Fingerprint struct {
	// Version is FingerprintVersion when it was computed: the hashes of
	// two versions are not compared.
	Version int               `json:"v"`
	Items   []FingerprintItem `json:"items"`
}

// FingerprintVersion is the version of the way fingerprints are computed.
const FingerprintVersion = 1

// FingerprintIterations are the PBKDF2 rounds of a secret's hash: some 50
// ms of one core each, paid once by a receiver's start-up and once by a
// command that compares.
const FingerprintIterations = 200_000

// MinFingerprintSalt is the fewest bytes a salt may have.
const MinFingerprintSalt = 16

// FingerprintItem is one setting of a Fingerprint.
type FingerprintItem struct {
	// Var is the variable (SMTP_ADDR, STRIPE_API_KEY).
	Var string `json:"var"`
	// Shown is what may be shown of its value: the value itself, a URL
	// without its credentials, or for a secret what start-up logs of it
	// (its masked form: whsec_****, sk_live_****) or "unset".
	Shown string `json:"shown"`
	// Hash is the keyed hash of a secret, or of a URL that carries
	// credentials; empty otherwise.
	Hash string `json:"hash,omitempty"`
	// Secret: the value is never shown, not even by a difference.
	Secret bool `json:"secret,omitempty"`
	// VerifyOnly: only the verification of deliveries uses it (a webhook
	// secret), which no operator command does: a difference is told, not
	// refused.
	VerifyOnly bool `json:"verify_only,omitempty"`
}

// Fingerprinter builds a Fingerprint, item by item, with the database's
// salt: the wiring lists what a receiver's steps use (internal/wiring).
type Fingerprinter struct {
	salt  []byte
	items []FingerprintItem
}

// NewFingerprinter starts a fingerprint keyed by the database's salt.
func NewFingerprinter(salt []byte) (*Fingerprinter, error) {
	if len(salt) < MinFingerprintSalt {
		return nil, fmt.Errorf("fingerprint salt of %d bytes; want at least %d", len(salt), MinFingerprintSalt)
	}
	return &Fingerprinter{salt: salt}, nil
}

// Fingerprint is what was recorded, in order.
func (f *Fingerprinter) Fingerprint() Fingerprint {
	return Fingerprint{Version: FingerprintVersion, Items: f.items}
}

// Plain records a setting that may be shown as it is.
func (f *Fingerprinter) Plain(name, value string) {
	f.items = append(f.items, FingerprintItem{Var: name, Shown: value})
}

// Secret records a secret: what start-up logs of it (masked), and its
// hash. verifyOnly: only the verification of deliveries uses it.
func (f *Fingerprinter) Secret(name, masked, value string, verifyOnly bool) {
	it := FingerprintItem{Var: name, Shown: "unset", Secret: true, VerifyOnly: verifyOnly}
	if value != "" {
		it.Shown, it.Hash = masked, f.hash(name, value)
	}
	f.items = append(f.items, it)
}

// URL records a URL as shown (its credentials masked), and the hash of
// the whole when it carries credentials that shown hides.
func (f *Fingerprinter) URL(name, shown, raw string) {
	it := FingerprintItem{Var: name, Shown: shown}
	if shown != raw {
		it.Hash = f.hash(name, raw)
	}
	f.items = append(f.items, it)
}

// hash is the keyed, slow hash of one variable's value.
func (f *Fingerprinter) hash(name, value string) string {
	k, err := pbkdf2.Key(sha256.New, name+"\x00"+value, f.salt, FingerprintIterations, 8)
	if err != nil { // only for parameters FIPS 140-3 mode refuses
		panic(fmt.Sprintf("fingerprint: %v", err))
	}
	return hex.EncodeToString(k)
}

// FingerprintDifference is one setting in which two fingerprints differ.
type FingerprintDifference struct {
	Var string
	// Shell and Receiver are what may be shown of each side's value:
	// "unset", a value, a secret's masked form.
	Shell, Receiver string
	// Secret: the values are secrets, Shell and Receiver say no more than
	// whether each is set.
	Secret bool
	// Credentials: the URLs are the same but for their credentials.
	Credentials bool
	// VerifyOnly: only the verification of deliveries uses the setting.
	VerifyOnly bool
}

// String is the difference as an operator reads it: "SMTP_ADDR: this
// shell: a:25 / receivers: b:25", or for a secret set on both sides
// "STRIPE_API_KEY: differs (a secret: neither value is shown)".
//
// What it quotes of a receiver's value comes from the database, and is
// printed to an operator's terminal: control characters are replaced.
func (d FingerprintDifference) String() string {
	shown := func(s string) string {
		if s == "" {
			return "unset"
		}
		return Printable(s)
	}
	switch {
	case d.Secret && d.Shell == d.Receiver:
		return Printable(d.Var) + ": differs (a secret: neither value is shown)"
	case d.Credentials:
		return Printable(d.Var) + ": differs in the credentials it carries (" + shown(d.Shell) + ")"
	}
	return fmt.Sprintf("%s: this shell: %s / receivers: %s", Printable(d.Var), shown(d.Shell), shown(d.Receiver))
}

// Printable is s with every control character (a terminal's escape, a line
// break) replaced by "?": what a command may print of a value it read.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// Diff lists the settings in which f (a shell's) differs from r (a
// receiver's), in f's order. A setting only one of them records (a newer
// version's) is not compared; nor are hashes of another Version.
func (f Fingerprint) Diff(r Fingerprint) []FingerprintDifference {
	theirs := make(map[string]FingerprintItem, len(r.Items))
	for _, it := range r.Items {
		theirs[it.Var] = it
	}
	hashes := f.Version == r.Version
	var out []FingerprintDifference
	for _, mine := range f.Items {
		other, ok := theirs[mine.Var]
		if !ok || (mine.Shown == other.Shown && (!hashes || mine.Hash == other.Hash)) {
			continue
		}
		out = append(out, FingerprintDifference{Var: mine.Var, Shell: mine.Shown, Receiver: other.Shown,
			Secret: mine.Secret || other.Secret, Credentials: !mine.Secret && mine.Shown == other.Shown,
			VerifyOnly: mine.VerifyOnly && other.VerifyOnly})
	}
	return out
}

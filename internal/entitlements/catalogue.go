package entitlements

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"
)

// DefaultGrace is how long a past-due subscription keeps its entitlements
// when the catalogue says nothing.
const DefaultGrace = 72 * time.Hour

// Providers are the names a catalogue may grant by, as rows name their
// source: a subscription item's or a paid order's price or product
// (Stripe also a feature of Stripe Entitlements), a Marketplace plan id.
var Providers = []string{"stripe", "paddle", "polar", "github_marketplace"}

// Catalogue is ENTITLEMENTS_FILE: which provider ids grant which keys,
// and the grace of a past-due subscription.
type Catalogue struct {
	Grace time.Duration
	// Grants are the catalogue's rows, sorted: provider, id, key.
	Grants []Grant
}

// Grant is one line of the catalogue: the provider's id grants the key.
type Grant struct {
	Source string // one of Providers
	ID     string // price_…, prod_…, feat_…, pri_…, pro_…, a Polar product id, a Marketplace plan id
	Key    string
}

// LineError is a catalogue refused: the file, the line and what is wrong
// there.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// Load reads and checks the catalogue at path.
func Load(path string) (*Catalogue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &LineError{File: path, Msg: "cannot be read: " + errors.Unwrap(err).Error()}
	}
	return Parse(path, b)
}

// maxKey bounds a key and an id: they travel in every call and page.
const maxKey = 100

// Parse reads a catalogue (YAML; JSON is YAML too) and checks all of it:
// an unknown member, an unknown provider, a key or id that is empty or
// too long, a grace that is not a duration, is refused with its line.
func Parse(file string, data []byte) (*Catalogue, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, &LineError{File: file, Msg: "is empty: it needs an `entitlements:` map (see docs/entitlements.md)"}
	} else if err != nil {
		return nil, yamlError(file, err)
	}
	fail := func(n *yaml.Node, format string, args ...any) error {
		return &LineError{File: file, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
	}
	if len(doc.Content) == 0 {
		return nil, &LineError{File: file, Msg: "is empty: it needs an `entitlements:` map (see docs/entitlements.md)"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fail(root, "the catalogue must be a map with `grace` and `entitlements`")
	}
	// A member named twice is refused: which one a reader keeps differs.
	if n := repeated(root); n != nil {
		return nil, fail(n, "%q is named twice", n.Value)
	}
	c := &Catalogue{Grace: DefaultGrace}
	seenEntitlements := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "grace":
			if v.Kind != yaml.ScalarNode {
				return nil, fail(v, "grace must be a duration such as 72h")
			}
			d, err := time.ParseDuration(v.Value)
			if err != nil || d < 0 || d > 366*24*time.Hour {
				return nil, fail(v, "grace %q is not a duration from 0s to 8784h (72h, 7d is 168h)", v.Value)
			}
			c.Grace = d
		case "entitlements":
			seenEntitlements = true
			if v.Kind != yaml.MappingNode {
				return nil, fail(v, "entitlements must map each key to the providers' ids that grant it")
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				key, grants := v.Content[j], v.Content[j+1]
				if !validKey(key.Value) {
					return nil, fail(key, "entitlement key %q must be 1 to %d letters, digits, '_', '-', '.' or ':'", key.Value, maxKey)
				}
				if grants.Kind != yaml.MappingNode {
					return nil, fail(grants, "entitlement %s must map providers (%s) to lists of ids", key.Value, strings.Join(Providers, ", "))
				}
				for g := 0; g+1 < len(grants.Content); g += 2 {
					prov, ids := grants.Content[g], grants.Content[g+1]
					if !slices.Contains(Providers, prov.Value) {
						return nil, fail(prov, "unknown provider %q (known: %s)", prov.Value, strings.Join(Providers, ", "))
					}
					list := []*yaml.Node{ids}
					if ids.Kind == yaml.SequenceNode {
						list = ids.Content
					}
					for _, id := range list {
						if id.Kind != yaml.ScalarNode || id.Value == "" || len(id.Value) > maxKey || strings.ContainsAny(id.Value, " \t\r\n") {
							return nil, fail(id, "%s id of %s must be a non-empty id of at most %d characters", prov.Value, key.Value, maxKey)
						}
						c.Grants = append(c.Grants, Grant{Source: prov.Value, ID: id.Value, Key: key.Value})
					}
				}
			}
		default:
			return nil, fail(k, "unknown member %q (the catalogue has grace and entitlements)", k.Value)
		}
	}
	if !seenEntitlements {
		return nil, fail(root, "no `entitlements:` map")
	}
	slices.SortFunc(c.Grants, func(a, b Grant) int {
		return strings.Compare(a.Source+"\x00"+a.ID+"\x00"+a.Key, b.Source+"\x00"+b.ID+"\x00"+b.Key)
	})
	c.Grants = slices.Compact(c.Grants)
	return c, nil
}

// yamlError names the line of a YAML syntax error, which yaml.v3 writes
// as "yaml: line N: …".
func yamlError(file string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		_, rest, _ := strings.Cut(msg, ":")
		return &LineError{File: file, Line: line, Msg: strings.TrimSpace(rest)}
	}
	return &LineError{File: file, Msg: msg}
}

// repeated returns the first mapping key of n, or of a map below it, that
// repeats one before it in its map; nil when none does.
func repeated(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if seen[n.Content[i].Value] {
				return n.Content[i]
			}
			seen[n.Content[i].Value] = true
		}
	}
	for _, c := range n.Content {
		if r := repeated(c); r != nil {
			return r
		}
	}
	return nil
}

func validKey(s string) bool {
	if s == "" || len(s) > maxKey {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:", r)) {
			return false
		}
	}
	return true
}

// Sources are the providers the catalogue grants by; none for a nil
// catalogue.
func (c *Catalogue) Sources() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, g := range c.Grants {
		if !slices.Contains(out, g.Source) {
			out = append(out, g.Source)
		}
	}
	return out
}

// NamesStripe reports whether the catalogue grants anything by a Stripe
// id: such grants need STRIPE_API_KEY for one-off purchases (a Checkout
// Session's line items are read from the API).
func (c *Catalogue) NamesStripe() bool {
	return slices.ContainsFunc(c.Grants, func(g Grant) bool { return g.Source == "stripe" })
}

// Fingerprint identifies the catalogue's content: a receiver that starts
// with another installs it.
func (c *Catalogue) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "grace %s\n", c.Grace)
	for _, g := range c.Grants {
		fmt.Fprintf(h, "%s\x00%s\x00%s\n", g.Source, g.ID, g.Key)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// installLock makes one receiver at a time install a catalogue.
const installLock = "entitlements:install"

// Install makes c the catalogue the database computes entitlements with,
// unless it is already: the catalogue's rows and grace are replaced, and
// every subject that has rows (or was told anything) is due to be
// computed again by the Job, in the background. It reports whether it
// changed anything. Replicas must run one catalogue: the last to start
// installs its own.
func Install(ctx context.Context, pool *pgxpool.Pool, c *Catalogue) (bool, error) {
	changed := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, installLock); err != nil {
			return err
		}
		var fp string
		err := tx.QueryRow(ctx, `SELECT fingerprint FROM entitlement_settings`).Scan(&fp)
		if err == nil && fp == c.Fingerprint() {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		changed = true
		var src, ids, keys []string
		for _, g := range c.Grants {
			src, ids, keys = append(src, g.Source), append(ids, g.ID), append(keys, g.Key)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM entitlement_catalogue`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO entitlement_catalogue (source, item_id, key)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING`, src, ids, keys); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO entitlement_settings (id, grace, fingerprint) VALUES (true, make_interval(secs => $1), $2)
ON CONFLICT (id) DO UPDATE SET grace = EXCLUDED.grace, fingerprint = EXCLUDED.fingerprint, updated_at = now()`,
			c.Grace.Seconds(), c.Fingerprint()); err != nil {
			return err
		}
		// Every subject is due: those told before, and those of every row.
		_, err = tx.Exec(ctx, `
INSERT INTO entitlement_subjects AS e (subject, version, entitlements, next_change_at)
SELECT DISTINCT s, 0, '[]'::jsonb, now() FROM (
    SELECT CASE WHEN customer_key IS NULL THEN app_user_id ELSE entitlement_subject_of(customer_key) END AS s FROM subscriptions
    UNION SELECT CASE WHEN customer_key IS NULL THEN app_user_id ELSE entitlement_subject_of(customer_key) END FROM orders
    UNION SELECT entitlement_subject_of(customer_key) FROM stripe_active_entitlements) AS x
WHERE s IS NOT NULL
ON CONFLICT (subject) DO NOTHING`)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE entitlement_subjects SET next_change_at = now()`)
		return err
	})
	return changed, err
}

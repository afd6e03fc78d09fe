package config

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Provider is one provider's variables: as its Spec declares them (how
// each is checked and masked) and as read.
type Provider struct {
	Source  string
	Secret  webhooks.Var      // its Spec.Secret
	Secrets []string          // Secret's value, split
	Vars    []webhooks.Var    // its Spec.Vars
	Values  map[string]string // the value of each of Vars, defaults applied
}

// Provider returns the variables of the provider source, and whether Load
// read them (it was among the specs Load was given).
func (c Config) Provider(source string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Source == source {
			return p, true
		}
	}
	return Provider{}, false
}

// Var returns the value of one of a provider's variables (any source).
func (c Config) Var(name string) string {
	for _, p := range c.Providers {
		if v, ok := p.Values[name]; ok {
			return v
		}
	}
	return ""
}

// devWord is what marks a value as a development one.
const devWord = "development"

// devRefusal ends the error of a value that says "development".
const devRefusal = `contains "` + devWord + `": a value from an example, refused outside the development tool ` +
	`(bin/dev, which make run uses, sets ` + DevEnv + `=1); set a random one`

// containsFold reports whether s contains word, in any case.
func containsFold(s, word string) bool {
	return strings.Contains(strings.ToLower(s), word)
}

// loadProviders reads the variables of every provider in specs: its
// secrets (a list: several while one is rotated), each checked by its
// Spec and by length, and refused when it says "development" outside the
// development tool; and its own variables, defaults applied, each checked
// by its Check.
func (c *Config) loadProviders(l *loader, specs []webhooks.Spec, dev bool) {
	for _, s := range specs {
		p := Provider{Source: s.Source, Secret: s.Secret, Secrets: l.list(s.Secret.Name), Vars: s.Vars, Values: map[string]string{}}
		for i, v := range p.Secrets {
			which := fmt.Sprintf("secret %d ", i+1)
			if s.Secret.Check != nil {
				if err := s.Secret.Check(v); err != nil {
					l.fail(s.Secret.Name, fmt.Sprintf("%s%v", which, err))
				}
			}
			c.checkLen(l, s.Secret, which, v)
			if !dev && containsFold(v, devWord) {
				l.fail(s.Secret.Name, which+devRefusal)
			}
		}
		for _, v := range s.Vars {
			val := l.str(v.Name, v.Default)
			if val != "" && v.Check != nil {
				if err := v.Check(val); err != nil {
					l.fail(v.Name, err.Error())
				}
			}
			if val != "" {
				c.checkLen(l, v, "", val)
			}
			p.Values[v.Name] = val
		}
		c.Providers = append(c.Providers, p)
	}
}

// checkLen refuses a value of v shorter than v.MinLen and warns of one
// shorter than v.WarnLen. which names the value within a list ("secret 2 ").
func (c *Config) checkLen(l *loader, v webhooks.Var, which, value string) {
	n := utf8.RuneCountInString(value)
	switch {
	case v.MinLen > 0 && n < v.MinLen:
		l.fail(v.Name, fmt.Sprintf("%sis shorter than %d characters", which, v.MinLen))
	case v.WarnLen > 0 && n < v.WarnLen:
		c.Warn(v.Name, fmt.Sprintf("%sis shorter than %d characters: replace it with a longer random one", which, v.WarnLen))
	}
}

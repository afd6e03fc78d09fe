package config

import (
	"strings"
	"testing"
)

// TestLogFormat: JSON lines by default, text under the development tool,
// either when LOG_FORMAT says so, anything else refused.
func TestLogFormat(t *testing.T) {
	for _, c := range []struct {
		dev, value string
		want       LogFormat
		err        string
	}{
		{want: LogJSON},
		{dev: "1", want: LogText},
		{value: "text", want: LogText},
		{dev: "1", value: "json", want: LogJSON},
		{value: "yaml", err: `LOG_FORMAT must be json or text, got "yaml"`},
	} {
		e := valid()
		e[DevEnv], e["LOG_FORMAT"] = c.dev, c.value
		cfg, err := Load(env(e), specs)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("dev %q LOG_FORMAT %q: error %v, want %q", c.dev, c.value, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("dev %q LOG_FORMAT %q: %v", c.dev, c.value, err)
		case c.err == "" && cfg.LogFormat != c.want:
			t.Errorf("dev %q LOG_FORMAT %q: %q, want %q", c.dev, c.value, cfg.LogFormat, c.want)
		}
	}
}

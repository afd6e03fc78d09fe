package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogFormat: the start-up line is a JSON object by default and
// key=value text under the development tool or with LOG_FORMAT=text. The
// database is one nobody listens on: start-up logs, then stops.
func TestLogFormat(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		json bool
	}{
		{"Default", nil, true},
		{"DevelopmentTool", map[string]string{"PAYWEBHOOKS_DEV": "1"}, false},
		{"Text", map[string]string{"LOG_FORMAT": "text"}, false},
		{"JSONUnderDevelopmentTool", map[string]string{"PAYWEBHOOKS_DEV": "1", "LOG_FORMAT": "json"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": "postgres://u:p@127.0.0.1:1/receiver?connect_timeout=2", "HTTP_ADDR": "127.0.0.1:0"}
			for k, v := range c.env {
				env[k] = v
			}
			var out, errOut bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := run(ctx, nil, getenv(env), &out, &errOut); err == nil {
				t.Fatal("served without a database")
			}
			first, _, _ := strings.Cut(out.String(), "\n")
			var line map[string]any
			isJSON := json.Unmarshal([]byte(first), &line) == nil
			switch {
			case isJSON != c.json:
				t.Errorf("JSON %v, want %v: %s", isJSON, c.json, first)
			case c.json && line["msg"] != "starting receiver":
				t.Errorf("first line %s", first)
			case !c.json && !strings.Contains(first, `level=INFO msg="starting receiver"`):
				t.Errorf("first line %s", first)
			}
		})
	}
}

// TestBrokenMailTemplateStopsStartUp: a template of MAIL_TEMPLATES_DIR that
// does not parse stops the process before it serves, naming the file.
func TestBrokenMailTemplateStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "order_confirmation.html.tmpl")
	if err := os.WriteFile(file, []byte("<p>{{.OrderID</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	env := map[string]string{"DATABASE_URL": "postgres://u:p@127.0.0.1:1/receiver", "MAIL_TEMPLATES_DIR": dir}
	err := run(context.Background(), nil, getenv(env), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "MAIL_TEMPLATES_DIR") || !strings.Contains(err.Error(), file) {
		t.Fatalf("error %v, want MAIL_TEMPLATES_DIR and %s named", err, file)
	}
	if exitCode(err) != 1 || out.Len() != 0 {
		t.Errorf("exit code %d, output %q: want 1 and nothing served", exitCode(err), out.String())
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/pgtest"
)

// TestLogFormat: the receiver logs JSON objects by default and key=value
// text under the development tool (or with LOG_FORMAT=text, which config's
// tests cover with LOG_FORMAT=json under the tool), from its first line to
// its last.
func TestLogFormat(t *testing.T) {
	for _, c := range []struct {
		name string
		dev  string
		json bool
	}{
		{"Default", "", true},
		{"DevelopmentTool", "1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": pgtest.NewDB(t), "HTTP_ADDR": "127.0.0.1:0", "PAYWEBHOOKS_DEV": c.dev}
			out := new(syncBuffer)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- run(ctx, nil, getenv(env), out, io.Discard) }()
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "receiver listening") {
				if time.Now().After(deadline) {
					t.Fatalf("not listening after 30s:\n%s", out)
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			for _, l := range lines {
				var v map[string]any
				if isJSON := json.Unmarshal([]byte(l), &v) == nil; isJSON != c.json {
					t.Errorf("JSON %v, want %v: %s", isJSON, c.json, l)
				}
			}
			if first := lines[0]; !strings.Contains(first, `"msg":"starting receiver"`) && !strings.Contains(first, `level=INFO msg="starting receiver"`) {
				t.Errorf("first line %s", first)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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

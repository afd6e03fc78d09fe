// Package standardwebhookstest runs the JavaScript library of Standard
// Webhooks (the npm package standardwebhooks, by the spec's authors) from
// Go tests: an implementation independent of this project's, which this
// project's signatures are held to, both ways.
//
//	js := standardwebhookstest.Install(t) // skips the test without npm
//	errs := js.Verify(t, msgs)            // "" for each message it accepts
//
// Install puts the package in a temporary directory of the test with the
// machine's npm, from the npm registry (a few seconds); a test that needs
// it calls it once and sends every message in one batch.
package standardwebhookstest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Version is the version of the npm package installed.
const Version = "1.1.1"

// JS is the npm package, installed.
type JS struct {
	dir string
}

// Install installs standardwebhooks@Version into a temporary directory of
// tb's. It skips the test, saying why, when node or npm is missing or the
// package cannot be installed (no registry).
func Install(tb testing.TB) *JS {
	tb.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Skipf("%s is not installed: the cross-check with the npm package standardwebhooks@%s is skipped", bin, Version)
		}
	}
	dir := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--no-package-lock",
		"--loglevel=error", "standardwebhooks@"+Version)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Skipf("npm install standardwebhooks@%s failed (%v): the cross-check is skipped\n%s", Version, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.js"), []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	return &JS{dir: dir}
}

// script reads {"op", "messages"} on stdin and writes one string per
// message: for "verify", "" when the library accepts it and its error's
// message when it refuses it; for "sign", the library's signature.
const script = `"use strict";
const { Webhook } = require("standardwebhooks");
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { input += d; });
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const out = req.messages.map((m) => {
    try {
      const wh = m.raw_key !== undefined
        ? new Webhook(Buffer.from(m.raw_key, "base64"), { format: "raw" })
        : new Webhook(m.secret);
      if (req.op === "sign") {
        return wh.sign(m.id, new Date(m.timestamp * 1000), m.body);
      }
      wh.verify(m.body, m.headers, { jsonParse: false });
      return "";
    } catch (e) {
      return "refused: " + (e && e.message ? e.message : String(e));
    }
  });
  process.stdout.write(JSON.stringify(out));
});
`

// Message is one message for the library.
type Message struct {
	// Secret is the secret written the spec's way ("whsec_…"), or, with
	// RawKey set, ignored.
	Secret string `json:"secret,omitempty"`
	// RawKey, when set, is the key as bytes (the library's "raw" format:
	// Polar's legacy keying with the whole string's UTF-8 bytes).
	RawKey []byte `json:"raw_key,omitempty"`
	// ID and Timestamp are what Sign signs.
	ID        string `json:"id,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
	// Body is the raw body; the library reads it as UTF-8 text.
	Body string `json:"body"`
	// Header is what Verify verifies: the message's headers, one value each.
	Header map[string]string `json:"headers,omitempty"`
}

// Verify has the library verify each message (Webhook.verify, with the
// current time) and returns, for each, "" when it accepts it or
// "refused: " and its error's message.
func (js *JS) Verify(tb testing.TB, msgs []Message) []string {
	tb.Helper()
	return js.run(tb, "verify", msgs)
}

// Sign has the library sign each message (Webhook.sign) and returns the
// signatures it makes ("v1,…"), or "refused: " and why.
func (js *JS) Sign(tb testing.TB, msgs []Message) []string {
	tb.Helper()
	return js.run(tb, "sign", msgs)
}

func (js *JS) run(tb testing.TB, op string, msgs []Message) []string {
	tb.Helper()
	in, err := json.Marshal(map[string]any{"op": op, "messages": msgs})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(js.dir, "run.js"))
	cmd.Dir = js.dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var res []string
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(msgs) {
		tb.Fatalf("node answered %d results for %d messages (%v): %s", len(res), len(msgs), err, out)
	}
	return res
}

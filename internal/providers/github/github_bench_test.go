package github_test

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	github "github.com/paywebhooks/receiver/internal/providers/github"
)

const benchSecret = "github-bench-secret-0123456789"

// BenchmarkVerify is the whole of Provider.Verify on a real signed
// delivery: HMAC-SHA256 over the raw body, the delivery headers and the
// JSON object check, for both content types GitHub sends.
func BenchmarkVerify(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "marketplace_purchase.purchased.flat_monthly.json"))
	if err != nil {
		b.Fatal(err)
	}
	form := []byte(url.Values{"payload": {string(body)}}.Encode())
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"json", "application/json", body},
		{"form", "application/x-www-form-urlencoded", form},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := http.Header{}
			h.Set("Content-Type", tc.contentType)
			h.Set(github.HeaderEvent, "marketplace_purchase")
			h.Set(github.HeaderDelivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
			h.Set(github.HeaderHookID, "4242")
			h.Set(github.HeaderSignature256, "sha256="+hex.EncodeToString(github.Sign(tc.body, benchSecret)))
			p := github.New([]string{benchSecret}, "")
			now := time.Now()
			if _, err := p.Verify(h, tc.body, now); err != nil {
				b.Fatalf("fixture does not verify: %v", err)
			}
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Verify(h, tc.body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

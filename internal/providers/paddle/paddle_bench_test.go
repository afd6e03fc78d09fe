package paddle_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/PaddleHQ/paddle-go-sdk/v4/pkg/paddlenotification"

	paddle "github.com/paywebhooks/receiver/internal/providers/paddle"
)

// BenchmarkDecode is what reading a transaction.completed costs, with the
// receiver's own types (one pass, the fields it reads) and with the SDK's
// (the envelope for the event type, then the whole transaction), on
// testdata's and on the SDK's own sample when the shared samples are
// beside the checkout. It is why this package decodes with its own types.
func BenchmarkDecode(b *testing.B) {
	bodies := map[string][]byte{"testdata": suite.Body(b, completed)}
	if s, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "samples", "paddle", "transaction.completed.paddle-go-sdk.json")); err == nil {
		bodies["sdk-sample"] = s
	}
	for name, body := range bodies {
		b.Run(name+"/own", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := paddle.Decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/sdk", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var env struct {
					EventType paddlenotification.EventTypeName `json:"event_type"`
				}
				if err := json.Unmarshal(body, &env); err != nil {
					b.Fatal(err)
				}
				var ev paddlenotification.TransactionCompleted
				if err := json.Unmarshal(body, &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerify is the whole of Provider.Verify on a signed
// transaction.completed: the header, HMAC-SHA256 over the body with each
// secret, the tolerance and the decode.
func BenchmarkVerify(b *testing.B) {
	body := suite.Body(b, completed)
	now := time.Now()
	for _, tc := range []struct {
		name    string
		secrets []string
	}{
		{"one-secret", []string{agreeSecret}},
		{"second-of-two-secrets", []string{agreeOld, agreeSecret}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := http.Header{}
			h.Set(paddle.HeaderSignature, paddle.SignatureHeader(body, now, agreeSecret))
			p := paddle.New(tc.secrets, paddle.DefaultTolerance)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Verify(h, body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReadBody: a body of declared length is read into one buffer of that
// size; a chunked one whole; one over the limit or cut short is an error;
// every byte paid for is given back.
func TestReadBody(t *testing.T) {
	const limit = 8 << 10
	type got struct {
		body []byte
		cap  int
		err  error
	}
	results := make(chan got, 1)
	recv := func(t *testing.T) got {
		t.Helper()
		select {
		case g := <-results:
			return g
		case <-time.After(10 * time.Second):
			t.Fatal("the handler read nothing")
			return got{}
		}
	}
	adm := NewAdmission(1 << 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := adm.enter(BlocksOfString("127.0.0.1"), w)
		b, err := u.read(r.Context(), http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
		u.leave()
		if used, sources := adm.Used(); used != 0 || sources != 0 {
			err = fmt.Errorf("after the read, %d bytes of %d sources still held", used, sources)
		}
		results <- got{b, cap(b), err}
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("0123456789abcdef"), 360) // 5,760 bytes

	t.Run("DeclaredLength", func(t *testing.T) {
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		g := recv(t)
		if g.err != nil || !bytes.Equal(g.body, body) || g.cap != len(body) {
			t.Errorf("read %d bytes (cap %d), err %v: want the %d bytes in a buffer of that size", len(g.body), g.cap, g.err, len(body))
		}
	})
	t.Run("Chunked", func(t *testing.T) {
		// An io.Reader of unknown length: the client sends it chunked.
		resp, err := http.Post(srv.URL, "application/json", io.MultiReader(bytes.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if g := recv(t); g.err != nil || !bytes.Equal(g.body, body) {
			t.Errorf("read %d bytes, err %v: want the %d bytes", len(g.body), g.err, len(body))
		}
	})
	t.Run("ChunkedOverTheLimit", func(t *testing.T) {
		big := bytes.Repeat(body, 2)
		resp, err := http.Post(srv.URL, "application/json", io.MultiReader(bytes.NewReader(big)))
		if err == nil {
			resp.Body.Close()
		}
		var tooLarge *http.MaxBytesError
		if g := recv(t); !errors.As(g.err, &tooLarge) {
			t.Errorf("err %v: want *http.MaxBytesError", g.err)
		}
	})
	t.Run("ClaimedLengthNotAllocatedUpFront", func(t *testing.T) {
		// A header claims 1 MiB; 100 bytes come. What is allocated follows
		// the bytes, not the header.
		u := adm.enter(BlocksOfString("127.0.0.1"), nil)
		defer u.leave()
		b, err := u.read(context.Background(), bytes.NewReader(body[:100]), 1<<20, 1<<20)
		if err != nil || len(b) != 100 {
			t.Fatalf("read %d bytes, err %v", len(b), err)
		}
		if cap(b) > firstBuffer || u.held != int64(cap(b)) {
			t.Errorf("a buffer of %d bytes (%d paid for) for a 100-byte body declared 1 MiB, want at most %d, all paid for",
				cap(b), u.held, firstBuffer)
		}
	})
	t.Run("CutShort", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			len(body), body[:100])
		conn.(*net.TCPConn).CloseWrite()
		defer conn.Close()
		if g := recv(t); g.err == nil {
			t.Errorf("read %d bytes of a body declared %d and cut at 100, no error", len(g.body), len(body))
		}
	})
}

// TestMediaType: MediaType reads every Content-Type as mime.ParseMediaType
// does, and the forms senders use without allocating.
func TestMediaType(t *testing.T) {
	for _, ct := range []string{
		"application/json", "application/json; charset=utf-8", "application/x-www-form-urlencoded",
		"Application/JSON", "application/json;charset=utf-8", "application/json; charset=UTF-8",
		"application/json; charset=utf-8; x=1", "application/json ;", "text/plain", "", "application/",
		"application/json; charset", "multipart/form-data; boundary=x",
	} {
		want, _, wantErr := mime.ParseMediaType(ct)
		got, err := MediaType(ct)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("MediaType(%q) = %q, %v; mime.ParseMediaType: %q, %v", ct, got, err, want, wantErr)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
		if n := testing.AllocsPerRun(100, func() { _, _ = MediaType(ct) }); n != 0 {
			t.Errorf("MediaType(%q): %.0f allocations, want 0", ct, n)
		}
	}
}

// TestAnswerJSON: a delivery's answer reads back as the JSON encoding/json
// writes for it (the same values; encoding/json also escapes <, > and &),
// whatever its event id holds.
func TestAnswerJSON(t *testing.T) {
	for _, r := range []response{
		{Outcome: "duplicate", Event: "evt_1NXhcZ2eZvKYlo2C0Bm6PK0U"},
		{Outcome: "rejected", Reason: "no_valid_signature"},
		{Outcome: "processed", Event: `quote " backslash \ <html> & tab` + "\t nul \x00 é 💳"},
		{Outcome: "processed", Event: "invalid \xff utf-8"},
		{Outcome: "parked"},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got := r.appendJSON(nil)
		var a, b response
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		_ = json.Unmarshal(want, &b)
		if a != b || got[len(got)-1] != '\n' {
			t.Errorf("appendJSON: %q reads as %+v; encoding/json: %s, %+v", got, a, want, b)
		}
	}
}

// TestTimeHint: a time in a body is read as a hint: an RFC 3339 string is
// its time; anything else reads as none, and never fails the decode.
func TestTimeHint(t *testing.T) {
	for body, want := range map[string]time.Time{
		`{"at":"2026-12-02T04:05:06.123Z"}`: time.Date(2026, 12, 2, 4, 5, 6, 123e6, time.UTC),
		`{"at":"yesterday"}`:                {},
		`{"at":1764650706}`:                 {},
		`{"at":null}`:                       {},
		`{"at":{"a":1}}`:                    {},
		`{}`:                                {},
	} {
		var v struct {
			At TimeHint `json:"at"`
		}
		if err := UnmarshalSigned([]byte(body), &v); err != nil {
			t.Errorf("%s: %v", body, err)
		}
		if got := v.At.Time(); !got.Equal(want) {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

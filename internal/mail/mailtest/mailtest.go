// Package mailtest provides a real SMTP server for tests, built on
// github.com/emersion/go-smtp and listening on 127.0.0.1.
//
//	srv := mailtest.NewServer(t)
//	sender := mail.SMTPSender{Addr: srv.Addr()} // loopback: no TLS by default
//	... // code under test sends mail
//	msgs := srv.WaitFor(t, 1, 5*time.Second)
package mailtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/mail"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Received is one message accepted by the server.
type Received struct {
	From      string   // envelope sender (MAIL FROM)
	To        []string // envelope recipients (RCPT TO)
	Data      []byte   // the message as transmitted
	MessageID string   // the Message-ID header, brackets included; "" if unparseable
	Username  string   // the AUTH PLAIN user, "" without AUTH
	TLS       bool     // whether the session used TLS (STARTTLS, or implicit)
}

// Server is a running test SMTP server. It accepts every sender and
// recipient, and AUTH PLAIN with any credentials. It is closed by the test's
// Cleanup.
type Server struct {
	srv   *smtp.Server
	ln    net.Listener
	roots *x509.CertPool // trusts the server's certificate; nil without TLS

	mu      sync.Mutex
	msgs    []Received
	failure error
	refusal *smtp.SMTPError // the reply to every RCPT TO; nil: accept
}

// NewServer starts a plain-text server (no STARTTLS; AUTH allowed anyway).
func NewServer(tb testing.TB) *Server { return newServer(tb, false, false) }

// NewTLSServer starts a server that offers STARTTLS with a self-signed
// certificate for 127.0.0.1 and localhost; RootCAs trusts it.
func NewTLSServer(tb testing.TB) *Server { return newServer(tb, true, false) }

// NewImplicitTLSServer starts a server that speaks TLS from the first
// byte (as on port 465), with a self-signed certificate for 127.0.0.1 and
// localhost; RootCAs trusts it.
func NewImplicitTLSServer(tb testing.TB) *Server { return newServer(tb, true, true) }

func newServer(tb testing.TB, withTLS, implicit bool) *Server {
	tb.Helper()
	var tlsConfig *tls.Config
	var roots *x509.CertPool
	if withTLS {
		cert, err := selfSigned()
		if err != nil {
			tb.Fatalf("mailtest: certificate: %v", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		roots = x509.NewCertPool()
		roots.AddCert(cert.Leaf)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("mailtest: listen: %v", err)
	}
	if implicit {
		ln = tls.NewListener(ln, tlsConfig)
		tlsConfig = nil // no STARTTLS on a connection that is TLS already
	}
	s := &Server{ln: ln, roots: roots}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{srv: s, conn: c}, nil
	}))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.TLSConfig = tlsConfig
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	// The server serves from a goroutine, which may not have started
	// serving when the test ends (one that fails at once). go-smtp's Close
	// closes only the listeners Serve has registered, and a Serve called
	// after Close blocks on its listener for ever: the cleanup closes the
	// listener itself, and waits only for a server that started serving.
	var (
		mu      sync.Mutex
		closed  bool          // the cleanup has run: do not serve
		serving chan struct{} // closed once Serve returns; nil until it is called
	)
	hook := beforeServe
	go func() {
		hook()
		mu.Lock()
		if closed {
			mu.Unlock()
			return
		}
		done := make(chan struct{})
		serving = done
		mu.Unlock()
		defer close(done)
		_ = s.srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		mu.Lock()
		closed = true
		done := serving
		mu.Unlock()
		_ = s.srv.Close()
		_ = ln.Close()
		if done != nil {
			<-done
		}
	})
	return s
}

// beforeServe runs in the serving goroutine before it serves: a test's
// hook.
var beforeServe = func() {}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// RootCAs returns a pool that trusts the server's certificate (nil for a
// server without TLS), for the sender's RootCAs.
func (s *Server) RootCAs() *x509.CertPool { return s.roots }

// Messages returns a copy of the messages accepted so far, in order.
func (s *Server) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.msgs...)
}

// SetFailure simulates an outage: while err is non-nil, RCPT and DATA are
// answered "451 <err>". SetFailure(nil) restores normal service.
func (s *Server) SetFailure(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = err
}

// RefuseRecipients makes the server answer every RCPT TO with code, as
// real servers do, quoting the recipient: "<code> <class>.1.1 <addr>:
// <reason>" ("550 5.1.1 <jane@example.com>: Recipient address rejected").
// RefuseRecipients(0, "") accepts them again.
func (s *Server) RefuseRecipients(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		s.refusal = nil
		return
	}
	s.refusal = &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{code / 100, 1, 1}, Message: reason}
}

// refuse returns the reply to RCPT TO for to, or nil.
func (s *Server) refuse(to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusal == nil {
		return nil
	}
	e := *s.refusal
	e.Message = "<" + to + ">: " + e.Message
	return &e
}

// WaitFor polls until at least n messages have been accepted and returns
// them; it fails the test if that takes longer than timeout.
func (s *Server) WaitFor(tb testing.TB, n int, timeout time.Duration) []Received {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msgs := s.Messages()
		if len(msgs) >= n {
			return msgs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("mailtest: got %d messages after %v, want %d", len(msgs), timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) fail() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		return nil
	}
	return &smtp.SMTPError{
		Code:         451,
		EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message:      s.failure.Error(),
	}
}

// session collects one SMTP transaction at a time.
type session struct {
	srv  *Server
	conn *smtp.Conn
	user string
	from string
	to   []string
}

var _ smtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, username, _ string) error {
		ss.user = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.srv.fail(); err != nil {
		return err
	}
	if err := ss.srv.refuse(to); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := ss.srv.fail(); err != nil {
		return err
	}
	rec := Received{
		From:     ss.from,
		To:       append([]string(nil), ss.to...),
		Data:     data,
		Username: ss.user,
	}
	if _, ok := ss.conn.TLSConnectionState(); ok {
		rec.TLS = true
	}
	if m, err := mail.ReadMessage(bytes.NewReader(data)); err == nil {
		rec.MessageID = m.Header.Get("Message-ID")
	}
	ss.srv.mu.Lock()
	ss.srv.msgs = append(ss.srv.msgs, rec)
	ss.srv.mu.Unlock()
	return nil
}

func (ss *session) Reset() {
	ss.from, ss.to = "", nil
}

func (ss *session) Logout() error { return nil }

// selfSigned returns a throwaway certificate for 127.0.0.1 and localhost.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mailtest"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

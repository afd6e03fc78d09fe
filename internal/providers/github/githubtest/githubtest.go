// Package githubtest is a fake of GitHub's Marketplace listing API for
// tests, served on loopback:
//
//	GET /marketplace_listing/plans
//	GET /marketplace_listing/plans/{plan_id}/accounts
//
// (and the same under /marketplace_listing/stubbed/), answered only to the
// GitHub App itself: every request must carry `Authorization: Bearer <JWT>`
// where the JWT is RS256-signed with the app's private key, its iss is the
// app id, and its iat and exp are whole seconds with exp after now, iat not
// in the future (a minute of clock drift allowed) and exp at most ten
// minutes after iat, as GitHub requires. Lists are paged with `page` and
// `per_page` (default 30, at most 100) and a Link header with rel="next",
// "last", "first" and "prev", the way GitHub pages; accounts take `sort`
// (created, updated) and `direction` (asc, desc).
//
// It can also misbehave as a broken or hostile API would (Misbehave,
// RedirectTo), for the tests of reconciliation's bounds.
package githubtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ListingTier is a plan of the Marketplace listing.
type ListingTier struct {
	ID                  int64
	Number              int
	Name                string
	Description         string
	MonthlyPriceInCents int
	YearlyPriceInCents  int
	PriceModel          string // as the API spells it: FLAT_RATE, PER_UNIT, FREE
	UnitName            string // per-unit plans: "seat"; empty: null
	HasFreeTrial        bool
	State               string // published (default), draft
	Bullets             []string
}

// Account is a GitHub account on a plan.
type Account struct {
	ID                       int64
	Login                    string
	Type                     string // Organization (default), User
	OrganizationBillingEmail string // empty: null
	BillingCycle             string // monthly (default), yearly
	UnitCount                int    // 0: null, as for flat-rate plans
	OnFreeTrial              bool
	FreeTrialEndsOn          time.Time // zero: null
	NextBillingDate          time.Time // zero: null
	UpdatedAt                time.Time // zero: null
	PendingChange            *PendingChange

	planID  int64
	created int // order of subscription, for sort=created
}

// PendingChange is a change that takes effect at the end of the billing
// cycle.
type PendingChange struct {
	ID            int64
	EffectiveDate time.Time
	UnitCount     int
	PlanID        int64
}

// Misbehaviour is a way the fake API can page wrongly (Misbehave).
type Misbehaviour int

const (
	// Behave: page as GitHub does.
	Behave Misbehaviour = iota
	// RepeatPage links every page of accounts to page 1 as its next.
	RepeatPage
	// StalePages answers every page of accounts with the first page's
	// accounts, and links it to the page after it, for ever.
	StalePages
	// Endless answers every page of accounts with accounts never listed
	// before, and links it to the page after it, for ever.
	Endless
)

// Request is one call the fake API answered.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Status int
}

// Server is a running fake of GitHub's Marketplace listing API.
type Server struct {
	// URL is the base URL of the API (GITHUB_API_URL), with a trailing slash.
	URL string
	// AppID is the GitHub App the server answers.
	AppID int64

	key *rsa.PrivateKey
	now func() time.Time

	mu        sync.Mutex
	plans     []ListingTier
	accounts  map[int64]*Account
	created   int
	failures  []int
	misbehave Misbehaviour
	redirect  string
	endless   int64
	hook      AppHook // the App's webhook (endpoints.go)

	// requests has a lock of its own: a request is recorded when its
	// answer starts, which may be under mu.
	reqMu    sync.Mutex
	requests []Request
}

// New starts a fake API for the GitHub App appID, with a fresh RSA key, and
// stops it when the test ends.
func New(tb testing.TB, appID int64) *Server {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatalf("githubtest: key: %v", err)
	}
	s := &Server{AppID: appID, key: key, now: time.Now, accounts: map[int64]*Account{}}
	ts := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL + "/"
	return s
}

// PrivateKeyPEM is the app's private key as GitHub hands it out (PKCS #1,
// "RSA PRIVATE KEY"): the value of GITHUB_APP_PRIVATE_KEY.
func (s *Server) PrivateKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(s.key)})
}

// SetClock replaces the server's clock for the JWT checks.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// AddPlan adds a plan to the listing, or replaces the plan with its id.
func (s *Server) AddPlan(p ListingTier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.IndexFunc(s.plans, func(q ListingTier) bool { return q.ID == p.ID }); i >= 0 {
		s.plans[i] = p
		return
	}
	s.plans = append(s.plans, p)
}

// Subscribe puts the account on a plan, taking it off any other plan.
func (s *Server) Subscribe(planID int64, a Account) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.ContainsFunc(s.plans, func(p ListingTier) bool { return p.ID == planID }) {
		panic(fmt.Sprintf("githubtest: no plan %d", planID))
	}
	a.planID = planID
	if old, ok := s.accounts[a.ID]; ok {
		a.created = old.created
	} else {
		s.created++
		a.created = s.created
	}
	s.accounts[a.ID] = &a
}

// Unsubscribe takes the account off its plan, as a cancellation does once
// it takes effect.
func (s *Server) Unsubscribe(accountID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.accounts, accountID)
}

// Misbehave makes the accounts listing page as m says, from the next
// request on.
func (s *Server) Misbehave(m Misbehaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.misbehave = m
}

// RedirectTo makes every request answered with a 307 to the same path and
// query at base (another server's URL); "" stops it.
func (s *Server) RedirectTo(base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirect = base
}

// Requests returns the calls answered so far, in order.
func (s *Server) Requests() []Request {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	return slices.Clone(s.requests)
}

// FailNext makes the next n requests fail with status.
func (s *Server) FailNext(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, status)
	}
}

// Sign makes a JWT for the app with the given claims, signed with its key:
// for tests of what the server refuses.
func (s *Server) Sign(claims map[string]any) string {
	return signJWT(s.key, map[string]any{"alg": "RS256", "typ": "JWT"}, claims)
}

func signJWT(key *rsa.PrivateKey, header, claims map[string]any) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	signing := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return signing + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// serveHTTP answers a request and records it, with its status, when its
// answer's status is written: before any of the answer reaches the client,
// which may decode a page and go on before the handler returns, so that
// Requests lists every request whose answer a client has read.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &recording{ResponseWriter: w, record: func(status int) {
		s.reqMu.Lock()
		defer s.reqMu.Unlock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: status})
	}}
	if status := s.answer(rw, r); !rw.recorded {
		rw.record(status)
	}
}

// recording is a ResponseWriter that calls record with the status before
// the status is written.
type recording struct {
	http.ResponseWriter
	record   func(status int)
	recorded bool
}

func (w *recording) WriteHeader(status int) {
	if !w.recorded {
		w.recorded = true
		w.record(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recording) Write(b []byte) (int, error) {
	if !w.recorded {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) int {
	s.mu.Lock()
	var fail int
	if len(s.failures) > 0 {
		fail, s.failures = s.failures[0], s.failures[1:]
	}
	redirect := s.redirect
	s.mu.Unlock()
	if redirect != "" {
		http.Redirect(w, r, strings.TrimSuffix(redirect, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		return http.StatusTemporaryRedirect
	}
	if fail != 0 {
		return writeMessage(w, fail, "Server Error (injected by the test)")
	}
	if msg := s.authenticate(r); msg != "" {
		return writeMessage(w, http.StatusUnauthorized, msg)
	}
	if st, ok := s.answerApp(w, r); ok {
		return st
	}
	if r.Method != http.MethodGet {
		return writeMessage(w, http.StatusNotFound, "Not Found")
	}
	path := strings.TrimPrefix(r.URL.Path, "/marketplace_listing")
	if path == r.URL.Path {
		return writeMessage(w, http.StatusNotFound, "Not Found")
	}
	path = strings.TrimPrefix(path, "/stubbed")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "plans":
		return s.listPlans(w, r)
	case len(parts) == 3 && parts[0] == "plans" && parts[2] == "accounts":
		id, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			return writeMessage(w, http.StatusNotFound, "Not Found")
		}
		return s.listAccounts(w, r, id)
	}
	return writeMessage(w, http.StatusNotFound, "Not Found")
}

// authenticate checks the app's JWT as GitHub does, and returns GitHub's
// message when it is refused.
func (s *Server) authenticate(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "Requires authentication"
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "A JSON web token could not be decoded"
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodePart(parts[0], &header); err != nil {
		return "A JSON web token could not be decoded"
	}
	if header.Alg != "RS256" {
		return "A JSON web token could not be decoded"
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "A JSON web token could not be decoded"
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return "'Issuer' claim ('iss') must be an Integer or the Client ID of the GitHub App, and the JWT must be signed with its private key"
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat json.Number     `json:"iat"`
		Exp json.Number     `json:"exp"`
	}
	if err := decodePart(parts[1], &claims); err != nil {
		return "A JSON web token could not be decoded"
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	if iss != strconv.FormatInt(s.AppID, 10) {
		return fmt.Sprintf("Integration not found: iss %s is not app %d", iss, s.AppID)
	}
	iat, err1 := claims.Iat.Int64()
	exp, err2 := claims.Exp.Int64()
	if err1 != nil || err2 != nil {
		return "'Issued at' and 'Expiration time' claims ('iat', 'exp') must be Integers"
	}
	s.mu.Lock()
	now := s.now().Unix()
	s.mu.Unlock()
	switch {
	case exp <= now:
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case iat > now+60:
		return "'Issued at' claim ('iat') must be an Integer representing a time in the past"
	case exp-iat > 600 || exp > now+600:
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	return ""
}

func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

// paging reads page and per_page as GitHub does.
func paging(q url.Values) (page, perPage int, ok bool) {
	page, perPage = 1, 30
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, false
		}
		page = n
	}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, false
		}
		perPage = min(n, 100)
	}
	return page, perPage, true
}

// writePage writes items[page] as JSON with GitHub's Link header.
func (s *Server) writePage(w http.ResponseWriter, r *http.Request, items []any) int {
	page, perPage, ok := paging(r.URL.Query())
	if !ok {
		return writeMessage(w, http.StatusUnprocessableEntity, "Invalid page or per_page")
	}
	last := max(1, (len(items)+perPage-1)/perPage)
	from := min(len(items), (page-1)*perPage)
	to := min(len(items), from+perPage)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(perPage))
		u := strings.TrimSuffix(s.URL, "/") + r.URL.Path + "?" + q.Encode()
		return fmt.Sprintf(`<%s>; rel="%s"`, u, rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(min(page-1, last), "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	body, err := json.Marshal(items[from:to])
	if err != nil {
		return writeMessage(w, http.StatusInternalServerError, err.Error())
	}
	return writeJSON(w, http.StatusOK, body)
}

func (s *Server) listPlans(w http.ResponseWriter, r *http.Request) int {
	s.mu.Lock()
	items := make([]any, 0, len(s.plans))
	for _, p := range s.plans {
		items = append(items, s.planJSON(p))
	}
	s.mu.Unlock()
	return s.writePage(w, r, items)
}

func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request, planID int64) int {
	q := r.URL.Query()
	sortBy, direction := q.Get("sort"), q.Get("direction")
	if sortBy != "" && sortBy != "created" && sortBy != "updated" {
		return writeMessage(w, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid sort %q", sortBy))
	}
	if direction != "" && direction != "asc" && direction != "desc" {
		return writeMessage(w, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid direction %q", direction))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.ContainsFunc(s.plans, func(p ListingTier) bool { return p.ID == planID }) {
		return writeMessage(w, http.StatusNotFound, "Not Found")
	}
	var accounts []*Account
	for _, a := range s.accounts {
		if a.planID == planID {
			accounts = append(accounts, a)
		}
	}
	slices.SortFunc(accounts, func(a, b *Account) int {
		c := a.created - b.created
		if sortBy == "updated" {
			c = a.UpdatedAt.Compare(b.UpdatedAt)
			if c == 0 {
				c = a.created - b.created
			}
		}
		if direction == "desc" || (direction == "" && sortBy != "") {
			return -c
		}
		return c
	})
	items := make([]any, 0, len(accounts))
	for _, a := range accounts {
		items = append(items, s.accountJSON(a))
	}
	if s.misbehave != Behave {
		return s.writeMisbehaving(w, r, planID, items)
	}
	return s.writePage(w, r, items)
}

// writeMisbehaving answers a page of accounts as s.misbehave says.
func (s *Server) writeMisbehaving(w http.ResponseWriter, r *http.Request, planID int64, items []any) int {
	page, perPage, ok := paging(r.URL.Query())
	if !ok {
		return writeMessage(w, http.StatusUnprocessableEntity, "Invalid page or per_page")
	}
	next := page + 1
	switch s.misbehave {
	case RepeatPage:
		next = 1
	case Endless:
		plan, _ := s.planByID(planID)
		items = items[:0]
		for range perPage {
			s.endless++
			a := &Account{ID: 1_000_000 + s.endless, Login: fmt.Sprintf("endless-%d", s.endless), planID: plan.ID}
			items = append(items, s.accountJSON(a))
		}
	}
	items = items[:min(len(items), perPage)]
	q := r.URL.Query()
	q.Set("page", strconv.Itoa(next))
	q.Set("per_page", strconv.Itoa(perPage))
	w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, strings.TrimSuffix(s.URL, "/"), r.URL.Path, q.Encode()))
	body, err := json.Marshal(items)
	if err != nil {
		return writeMessage(w, http.StatusInternalServerError, err.Error())
	}
	return writeJSON(w, http.StatusOK, body)
}

func (s *Server) planByID(id int64) (ListingTier, bool) {
	i := slices.IndexFunc(s.plans, func(p ListingTier) bool { return p.ID == id })
	if i < 0 {
		return ListingTier{}, false
	}
	return s.plans[i], true
}

func (s *Server) planJSON(p ListingTier) map[string]any {
	base := strings.TrimSuffix(s.URL, "/")
	state := p.State
	if state == "" {
		state = "published"
	}
	bullets := p.Bullets
	if bullets == nil {
		bullets = []string{}
	}
	return map[string]any{
		"url":                    fmt.Sprintf("%s/marketplace_listing/plans/%d", base, p.ID),
		"accounts_url":           fmt.Sprintf("%s/marketplace_listing/plans/%d/accounts", base, p.ID),
		"id":                     p.ID,
		"number":                 p.Number,
		"name":                   p.Name,
		"description":            p.Description,
		"monthly_price_in_cents": p.MonthlyPriceInCents,
		"yearly_price_in_cents":  p.YearlyPriceInCents,
		"price_model":            p.PriceModel,
		"has_free_trial":         p.HasFreeTrial,
		"unit_name":              nullString(p.UnitName),
		"state":                  state,
		"bullets":                bullets,
	}
}

func (s *Server) accountJSON(a *Account) map[string]any {
	typ := a.Type
	if typ == "" {
		typ = "Organization"
	}
	cycle := a.BillingCycle
	if cycle == "" {
		cycle = "monthly"
	}
	plan, _ := s.planByID(a.planID)
	out := map[string]any{
		"url":                        fmt.Sprintf("%s/orgs/%s", strings.TrimSuffix(s.URL, "/"), a.Login),
		"type":                       typ,
		"id":                         a.ID,
		"login":                      a.Login,
		"organization_billing_email": nullString(a.OrganizationBillingEmail),
		"marketplace_purchase": map[string]any{
			"billing_cycle":      cycle,
			"next_billing_date":  nullTime(a.NextBillingDate),
			"unit_count":         nullInt(a.UnitCount),
			"on_free_trial":      a.OnFreeTrial,
			"free_trial_ends_on": nullTime(a.FreeTrialEndsOn),
			"updated_at":         nullTime(a.UpdatedAt),
			"plan":               s.planJSON(plan),
		},
		"marketplace_pending_change": nil,
	}
	if pc := a.PendingChange; pc != nil {
		change := map[string]any{
			"effective_date": nullTime(pc.EffectiveDate),
			"unit_count":     nullInt(pc.UnitCount),
			"id":             pc.ID,
			"plan":           nil,
		}
		if p, ok := s.planByID(pc.PlanID); ok {
			change["plan"] = s.planJSON(p)
		}
		out["marketplace_pending_change"] = change
	}
	return out
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) int {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
	w.WriteHeader(status)
	w.Write(body)
	return status
}

func writeMessage(w http.ResponseWriter, status int, msg string) int {
	b, _ := json.Marshal(map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest/apps/marketplace"})
	return writeJSON(w, status, b)
}

package paddletest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The fake's notification settings (the endpoint check's API), as Paddle
// documents them (developer.paddle.com/api-reference/notification-settings):
//
//   - GET /notification-settings: `after` (an id), `per_page` (default and
//     at most 200), `order_by` (`id[ASC]`, `id[DESC]` the default),
//     `active`, `traffic_source`; any other parameter is a 400. The answer
//     is `{"data", "meta": {"request_id", "pagination": {"per_page",
//     "next", "has_more", "estimated_total"}}}`, each setting with its
//     `endpoint_secret_key`, as Paddle's.
//   - PATCH /notification-settings/{id} (JSON): `description`,
//     `destination`, `active`, `api_version`, `include_sensitive_fields`,
//     `subscribed_events` (names, the whole list), `traffic_source`.
//   - POST /notification-settings (JSON): `description`, `type`,
//     `destination` and `subscribed_events` required, `api_version`
//     (default 1), `include_sensitive_fields`, `traffic_source` (default
//     platform). An 11th active destination is refused, as Paddle allows
//     10.
//
// Unknown fields of a body are a 400, as Paddle's validation refuses them.

// MaxActiveSettings is how many destinations may be active at once.
const MaxActiveSettings = 10

// NotificationSetting is one notification destination the fake holds.
type NotificationSetting struct {
	ID               string
	Description      string
	Type             string // url (default), email
	Destination      string
	Active           bool
	APIVersion       int    // 0: 1
	TrafficSource    string // platform (default), simulation, all
	SubscribedEvents []string
	SecretKey        string // pdl_ntfset_…
}

// settingsState is the fake's destinations, in id order.
type settingsState struct {
	list []*NotificationSetting
	seq  int
}

// AddNotificationSetting adds a destination, its id, secret key, type,
// version and traffic source filled in when empty, and returns it.
func (s *Server) AddNotificationSetting(n NotificationSetting) NotificationSetting {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addSettingLocked(n)
}

func (s *Server) addSettingLocked(n NotificationSetting) *NotificationSetting {
	s.settings.seq++
	if n.ID == "" {
		n.ID = "ntfset_" + base32(uint64(time.Now().UnixMilli())) + base32(uint64(s.settings.seq))
	}
	if n.Type == "" {
		n.Type = "url"
	}
	if n.APIVersion == 0 {
		n.APIVersion = 1
	}
	if n.TrafficSource == "" {
		n.TrafficSource = "platform"
	}
	if n.SecretKey == "" {
		sum := sha256.Sum256([]byte(n.ID))
		n.SecretKey = "pdl_ntfset_" + hex.EncodeToString(sum[:16])
	}
	n.SubscribedEvents = slices.Clone(n.SubscribedEvents)
	p := &n
	s.settings.list = append(s.settings.list, p)
	slices.SortFunc(s.settings.list, func(a, b *NotificationSetting) int { return strings.Compare(a.ID, b.ID) })
	return p
}

// NotificationSettings returns the destinations, in id order.
func (s *Server) NotificationSettings() []NotificationSetting {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]NotificationSetting, len(s.settings.list))
	for i, n := range s.settings.list {
		out[i] = *n
		out[i].SubscribedEvents = slices.Clone(n.SubscribedEvents)
	}
	return out
}

// DeleteNotificationSetting deletes a destination.
func (s *Server) DeleteNotificationSetting(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings.list = slices.DeleteFunc(s.settings.list, func(n *NotificationSetting) bool { return n.ID == id })
}

// answerSettings answers the notification settings' paths (ok false:
// another path).
func (s *Server) answerSettings(w http.ResponseWriter, r *http.Request) (int, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/notification-settings")
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return 0, false
	}
	id := strings.TrimPrefix(rest, "/")
	switch {
	case r.Method == http.MethodGet && id == "":
		return s.listSettings(w, r), true
	case r.Method == http.MethodPatch && id != "", r.Method == http.MethodPost && id == "":
		return s.writeSetting(w, r, id), true
	}
	return writeError(w, http.StatusNotFound, "request_error", "not_found", "Entity not found."), true
}

func (s *Server) listSettings(w http.ResponseWriter, r *http.Request) int {
	perPage, desc, after := MaxPerPage, true, ""
	var active *bool
	traffic := ""
	for name, vals := range r.URL.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "per_page":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "per_page must be a positive integer")
			}
			perPage = min(n, MaxPerPage)
		case "order_by":
			switch v {
			case "id[ASC]":
				desc = false
			case "id[DESC]":
			default:
				return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "order_by: id[ASC] or id[DESC]")
			}
		case "after":
			after = v
		case "active":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "active must be true or false")
			}
			active = &b
		case "traffic_source":
			traffic = v
		default:
			return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "unknown query parameter: "+name)
		}
	}
	s.mu.Lock()
	all := slices.Clone(s.settings.list)
	var matching []*NotificationSetting
	if desc {
		slices.Reverse(all)
	}
	for _, n := range all {
		if after != "" && ((!desc && n.ID <= after) || (desc && n.ID >= after)) ||
			active != nil && n.Active != *active || traffic != "" && n.TrafficSource != traffic {
			continue
		}
		matching = append(matching, n)
	}
	page, more := matching, false
	if len(matching) > perPage {
		page, more = matching[:perPage], true
	}
	data := make([]map[string]any, len(page))
	for i, n := range page {
		data[i] = settingJSON(n)
	}
	s.mu.Unlock()
	next := r.URL.Query()
	if len(page) > 0 {
		next.Set("after", page[len(page)-1].ID)
	}
	b, _ := json.MarshalIndent(map[string]any{"data": data, "meta": map[string]any{
		"request_id": fmt.Sprintf("req_%d", time.Now().UnixNano()),
		"pagination": map[string]any{"per_page": perPage, "next": s.URL + "/notification-settings?" + next.Encode(),
			"has_more": more, "estimated_total": len(matching)},
	}}, "", "  ")
	return writeBody(w, http.StatusOK, b)
}

// eventName is what the fake takes as an event type name.
var eventName = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)+$`)

// settingBody is a PATCH or POST body; nil fields were not sent.
type settingBody struct {
	Description            *string   `json:"description"`
	Type                   *string   `json:"type"`
	Destination            *string   `json:"destination"`
	Active                 *bool     `json:"active"`
	APIVersion             *int      `json:"api_version"`
	IncludeSensitiveFields *bool     `json:"include_sensitive_fields"`
	SubscribedEvents       *[]string `json:"subscribed_events"`
	TrafficSource          *string   `json:"traffic_source"`
}

func (s *Server) writeSetting(w http.ResponseWriter, r *http.Request, id string) int {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return writeError(w, http.StatusBadRequest, "request_error", "bad_request", "Content-Type must be application/json")
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return writeError(w, http.StatusBadRequest, "request_error", "bad_request", "unreadable body")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var b settingBody
	if err := dec.Decode(&b); err != nil {
		return writeError(w, http.StatusBadRequest, "request_error", "invalid_json", "Invalid request body: "+err.Error())
	}
	if b.SubscribedEvents != nil {
		if len(*b.SubscribedEvents) == 0 {
			return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "subscribed_events must not be empty")
		}
		for _, e := range *b.SubscribedEvents {
			if !eventName.MatchString(e) {
				return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "subscribed_events: unknown event type "+e)
			}
		}
	}
	if b.TrafficSource != nil && !slices.Contains([]string{"platform", "simulation", "all"}, *b.TrafficSource) {
		return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "traffic_source: platform, simulation or all")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n *NotificationSetting
	status := http.StatusOK
	if id == "" {
		if b.Description == nil || b.Type == nil || b.Destination == nil || b.SubscribedEvents == nil {
			return writeError(w, http.StatusBadRequest, "request_error", "invalid_field",
				"description, type, destination and subscribed_events are required")
		}
		if s.activeLocked() >= MaxActiveSettings {
			return writeError(w, http.StatusBadRequest, "request_error", "notification_maximum_active_settings_reached",
				"You can only have 10 active notification settings.")
		}
		n = s.addSettingLocked(NotificationSetting{Active: true})
		status = http.StatusCreated
	} else if i := slices.IndexFunc(s.settings.list, func(n *NotificationSetting) bool { return n.ID == id }); i >= 0 {
		n = s.settings.list[i]
		if b.Active != nil && *b.Active && !n.Active && s.activeLocked() >= MaxActiveSettings {
			return writeError(w, http.StatusBadRequest, "request_error", "notification_maximum_active_settings_reached",
				"You can only have 10 active notification settings.")
		}
	} else {
		return writeError(w, http.StatusNotFound, "request_error", "not_found", "Entity "+id+" not found.")
	}
	if b.Description != nil {
		n.Description = *b.Description
	}
	if b.Type != nil {
		n.Type = *b.Type
	}
	if b.Destination != nil {
		n.Destination = *b.Destination
	}
	if b.Active != nil {
		n.Active = *b.Active
	}
	if b.APIVersion != nil {
		n.APIVersion = *b.APIVersion
	}
	if b.SubscribedEvents != nil {
		n.SubscribedEvents = slices.Clone(*b.SubscribedEvents)
	}
	if b.TrafficSource != nil {
		n.TrafficSource = *b.TrafficSource
	}
	out, _ := json.MarshalIndent(map[string]any{"data": settingJSON(n),
		"meta": map[string]string{"request_id": fmt.Sprintf("req_%d", time.Now().UnixNano())}}, "", "  ")
	return writeBody(w, status, out)
}

func (s *Server) activeLocked() int {
	n := 0
	for _, x := range s.settings.list {
		if x.Active {
			n++
		}
	}
	return n
}

// settingJSON is a destination as Paddle's API writes it, secret key
// included.
func settingJSON(n *NotificationSetting) map[string]any {
	events := make([]map[string]any, len(n.SubscribedEvents))
	for i, e := range n.SubscribedEvents {
		group, _, _ := strings.Cut(e, ".")
		events[i] = map[string]any{"name": e, "description": "Occurs when " + e + ".", "group": group,
			"available_versions": []int{1}}
	}
	return map[string]any{
		"id": n.ID, "description": n.Description, "type": n.Type, "destination": n.Destination, "active": n.Active,
		"api_version": n.APIVersion, "include_sensitive_fields": false, "subscribed_events": events,
		"endpoint_secret_key": n.SecretKey, "traffic_source": n.TrafficSource,
	}
}

func writeBody(w http.ResponseWriter, status int, b []byte) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	return status
}

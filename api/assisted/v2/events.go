package assistedapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strings"
)

// EventsPath lists events: ?cluster_id=, ?infra_env_id= or
// ?infra_env_id=&host_id=, with api_key (EventsQuery).
const EventsPath = BasePath + "/v2/events"

// Event is one event of an install, in upstream's shape.
type Event struct {
	ClusterID  string `json:"cluster_id,omitempty"`
	InfraEnvID string `json:"infra_env_id,omitempty"`
	HostID     string `json:"host_id,omitempty"`
	// EventTime is RFC 3339.
	EventTime string `json:"event_time"`
	Name      string `json:"name,omitempty"`
	Message   string `json:"message"`
	// Severity is info, warning, error or critical.
	Severity string `json:"severity"`
	// Category is user (what people read) or metrics.
	Category string `json:"category"`
}

// Severities of events.
const (
	SeverityInfo    = "info"
	SeverityWarning = "warning"
)

// EventsQuery returns the query of an events URL: the filters (e.g.
// "cluster_id", id) and their api_key, an HMAC of the filters with the
// hub's signing key. Like the agent token it does not expire.
func EventsQuery(key []byte, filters ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(filters); i += 2 {
		q.Set(filters[i], filters[i+1])
	}
	q.Set("api_key", eventsKey(key, q))
	return q.Encode()
}

// VerifyEventsQuery checks an events URL's api_key against its filters.
func VerifyEventsQuery(key []byte, q url.Values) error {
	got := q.Get("api_key")
	if got == "" || !hmac.Equal([]byte(got), []byte(eventsKey(key, q))) {
		return ErrBadToken
	}
	return nil
}

// eventsKey signs the filters of q (every parameter but api_key).
func eventsKey(key []byte, q url.Values) string {
	var b strings.Builder
	for _, f := range []string{"cluster_id", "infra_env_id", "host_id"} {
		b.WriteString(f + "=" + q.Get(f) + "\x00")
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte("agent-install/events\x00" + b.String()))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Package ignitionapi (api/ignition/v1) is the contract of the hub's
// ignition server: where a machine fetches an Ignition config too large for
// its user data, how it authenticates, and which Secrets may be served. The
// server, the bootstrap provider that writes the pointer configs, and the
// machines (real, or the simulator's) rely on it.
package ignitionapi

import (
	"strconv"
	"strings"
	"time"
)

// PathPrefix is where configs are served: PathPrefix<namespace>/<name>.
const PathPrefix = "/ignition/v1/"

// ServedLabel marks the Secrets the server may serve; their ValueKey holds
// the config. A Secret without it is never served.
const ServedLabel = "bootstrap.cluster.x-k8s.io/served-ignition"

// ValueKey is the key of a served Secret that holds the config.
const ValueKey = "value"

// AuthorizationHeader carries "Bearer <token>": the token is
// "<unix expiry>.<owner UID>.<signature>", bound to the Secret's namespace,
// name and controller owner's UID and to the expiry, and refused after it.
const AuthorizationHeader = "Authorization"

// TokenExpiry reads when a token expires, without checking it: for
// scheduling its renewal, never for trusting it.
func TokenExpiry(token string) (time.Time, bool) {
	exp, _, ok := strings.Cut(token, ".")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || strconv.FormatInt(unix, 10) != exp {
		return time.Time{}, false
	}
	return time.Unix(unix, 0), true
}

// FirstFetchAnnotation on a served Secret is when its config was first
// fetched (RFC 3339), written by the server; it serves the config for a
// fetch window after that only.
const FirstFetchAnnotation = "bootstrap.cluster.x-k8s.io/ignition-first-fetch"

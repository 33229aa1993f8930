// Package serving builds the HTTP servers that machines talk to (the host
// engine's deploy server, the ignition server, the agent service) with the
// budgets that keep one client from holding the hub: read, idle and
// stalled-write timeouts, header and body caps, and per-source rate limits
// on unauthenticated requests and on failed authentications (Budgets,
// NewServer, Handler). It also serves them over TLS with certificate, key
// and CA files read again when they change (Certificate, CA, TLSFiles).
//
// It knows nothing of the servers' routes or credentials: a server tells
// which of its requests are unauthenticated, and a failed authentication
// is a response with status 401 or 403. It must not read the API.
package serving

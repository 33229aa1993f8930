// Package deployserver is the host engine's HTTP endpoint for hosts: it
// serves the deploy ISO and iPXE script behind URLs signed for one host's
// request and an expiry, answers network boots by MAC address and lookups
// only while the engine boots a host for its current request, exchanges a
// boot's one-request ticket for the request's agent token once, and serves
// the deploy agent API (deployapi v1) to that token until the request's
// report is final. It is stateless: what a host's agent must do is the
// BareMetalHost's status.deployAgent.request (written by the engine), the
// token handed out is recorded as a hash in status.deployAgent.token, and
// each report is patched into status.deployAgent.report, which wakes the
// engine through its watch; those writes carry the host's resourceVersion.
// It reads hosts from the manager's cache, and from the API where the cached
// copy is older than a write the engine or the server made (the
// reconciler.Writes they share), or than another writer's write that
// refused one of its own.
// Any number of replicas serve the same hosts; a report reaching a replica
// that is not the leader is not lost. It must never keep or log an agent
// token.
package deployserver

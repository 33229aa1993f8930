// Package deployserver is the host engine's HTTP endpoint for hosts: it
// serves the deploy ISO and iPXE script behind per-host, expiring signed
// URLs, and the deploy agent API (deployapi v1). It is stateless: what a
// host's agent must do is the BareMetalHost's status.deployAgent.request
// (written by the engine), and each report is patched into
// status.deployAgent.report, which wakes the engine through its watch. Any
// number of replicas serve the same hosts; a report reaching a replica that
// is not the leader is not lost.
package deployserver

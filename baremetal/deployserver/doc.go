// Package deployserver is the host engine's HTTP endpoint for hosts: it
// serves the deploy ISO and iPXE script behind per-host, expiring signed
// URLs, and the deploy agent API (deployapi v1). It reads BareMetalHosts and
// their Secrets to answer what a host must do, and keeps the agents' last
// reports in memory for the BareMetalHost reconciler, which it wakes on each
// report. Agents repeat final reports, so nothing is lost on restart.
package deployserver

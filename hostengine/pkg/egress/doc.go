// Package egress is the host engine's policy on where BMC connections may
// go. A BMC address is written by whoever writes BareMetalHosts, and the
// engine sends that host's credentials there: without a policy, a tenant
// could point the engine at the hub's own loopback services or at a cloud
// metadata endpoint. The policy is checked when a connection is opened, on
// the address a name resolved to, so a DNS name that resolves to a refused
// address is refused too. It holds no Kubernetes types and opens no
// connections itself.
package egress

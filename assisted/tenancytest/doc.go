// Package tenancytest holds the attacker's tests of tenancy on a hub
// without metalshift's validating webhooks: the agent service's
// controllers alone must keep one namespace from binding an Agent, a host
// or an NMStateConfig into another namespace's cluster, and must load a
// tenant's kubeconfig with inline credentials only. The tenant writes
// through the API server as itself (a namespace admin, by impersonation);
// the hub plays the victim's installed cluster. It has no code of its own.
package tenancytest

// Package baremetalhost reconciles BareMetalHosts: a table-driven state
// machine (host_state_machine.go) that registers a host with its BMC,
// inspects it out of band, makes it available, provisions it through the
// deploy agent, deprovisions and deletes it, and keeps its power as the spec
// says. It talks to hardware only through the provisioner interface and to
// agents only through the deploy server.
package baremetalhost

// Package console is the hub's web console: fleet, hosts and installs at
// a glance, kept live, acting as the signed-in user.
//
// Every read and write goes to the kube-apiserver with the signed-in
// user's own bearer token, through a client built per session from the
// hub's API address and CA without the manager's credentials, so the
// API's authentication and RBAC decide what a user sees and may do. The
// token stays in a server-side session; the browser holds only a random
// session ID (an HttpOnly, SameSite=Strict cookie) and a per-session CSRF
// token that every write must carry.
//
// It must not read or write the fleet with the manager's credentials,
// and must never log or echo a token.
package console

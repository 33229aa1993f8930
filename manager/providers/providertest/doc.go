// Package providertest lets a test run a clusterctl provider's components
// with the permissions its Deployment has: its RBAC objects, created as
// clusterctl would, and a client configuration that acts as its
// ServiceAccount (impersonation) and records every request the API server
// refuses. A test that runs a provider's components this way finds a
// permission its role lacks as a refusal, instead of in production. It
// talks only to the API server it is given.
package providertest

// Package webhooks is the bare-metal operator's admission webhook: it
// refuses a Provisioning not named provisioning-configuration, and one whose
// spec breaks a rule of package provisioning on the cluster's platform. It
// holds no reconciler logic; the reconciler checks the same rules again.
package webhooks

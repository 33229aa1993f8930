// Package provisioning is the bare-metal operator's pure logic about a
// Provisioning: which provisioning-network modes a platform allows (the
// upstream platform table) and the validation of a spec, with upstream's
// messages, each naming its field. The admission webhook and the reconciler
// both call Validate. No Kubernetes client here.
package provisioning

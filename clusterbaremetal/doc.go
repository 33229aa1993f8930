// Package clusterbaremetal is metalshift's bare-metal operator, our counterpart of
// openshift/cluster-baremetal-operator, as a component of the manager
// (--baremetal-operator). On an OpenShift cluster it reads the platform
// from the Infrastructure "cluster" and the Provisioning singleton
// (metal3.io/v1alpha1, provisioning-configuration), renders and owns the
// metal3 Deployment in openshift-machine-api (metalshift's manager running
// the host engine) and reports the "baremetal" ClusterOperator; its
// admission webhook validates Provisionings.
//
// Layout: pkg/provisioning (platform table, validation), pkg/metal3 (the
// Deployment), reconcilers/provisioning (the controller), webhooks, and
// setup.go (the Component). See docs/cluster-baremetal-operator.md.
package clusterbaremetal

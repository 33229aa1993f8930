// Package provisioning is the bare-metal operator's one controller: from
// the Infrastructure "cluster" and the Provisioning singleton it renders and
// owns the metal3 Deployment (metalshift's host engine) and reports the
// "baremetal" ClusterOperator. Everything it acts on is in the API: a
// reconcile may stop at any line and the next one carries on.
//
// It must not import the hub's wiring (component/, manager/): package
// clusterbaremetal (its setup.go) sets its fields.
package provisioning

package manager

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/bootstrap"
	"github.com/metalshift/metalshift/clusterbaremetal"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/console"
	"github.com/metalshift/metalshift/controlplane"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/infrastructure/equinix"
	"github.com/metalshift/metalshift/infrastructure/metal"
)

// Name identifies the hub manager towards the API server; it names its
// leader-election Lease.
const Name = "metalshift-manager"

// Components returns new values of the hub's components, in the order they
// register. A new component joins the hub with one line here.
func Components() []component.Component {
	return []component.Component{
		component.CAPICore,
		hostengine.Component(),
		bootstrap.Component(),
		controlplane.Component(),
		metal.Component(),
		equinix.Component(),
		assisted.Component(),
		clusterbaremetal.Component(),
		console.Component(),
	}
}

// NewScheme returns the hub's scheme: every type its components serve or
// read. Clients of the hub (the installer, tests) use it.
func NewScheme() (*runtime.Scheme, error) {
	return component.NewScheme(Components()...)
}

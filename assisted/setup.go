package assisted

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/component"
)

// Component is the agent-based install as a part of the hub: its API
// groups' types and CRDs, and no controller yet.
func Component() component.Component {
	return component.Component{
		Name:        "agent-install",
		AddToScheme: AddToScheme,
		CRDs: []string{
			"crd/bases/agent-install.openshift.io_*.yaml",
			"crd/bases/extensions.hive.openshift.io_*.yaml",
			"crd/bases/hive.openshift.io_*.yaml",
		},
		Setup: func(context.Context, *component.Hub) error { return nil },
	}
}

// AddToScheme adds the types of the agent-based install's API groups:
// agent-install.openshift.io, extensions.hive.openshift.io and hive's.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		agentinstallv1.AddToScheme, hiveextv1.AddToScheme, hivev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

package baremetalhost_test

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/metalshift/metalshift/component"
)

// ctrlConfigSkipNameValidation is the managers' controller configuration
// (component.ControllerConfig), letting each test start its own engine
// with the same controller names.
func ctrlConfigSkipNameValidation() config.Controller {
	c := component.ControllerConfig()
	c.SkipNameValidation = ptr.To(true)
	return c
}

package baremetalhost_test

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// ctrlConfigSkipNameValidation lets each test start its own engine with
// the same controller names.
func ctrlConfigSkipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

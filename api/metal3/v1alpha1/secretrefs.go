package v1alpha1

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateSecretNamespaces refuses references to Secrets of another
// namespace than the host's: whoever may edit a host could otherwise have
// another namespace's Secret written to a disk they control. The admission
// webhook and the host engine both apply it.
func ValidateSecretNamespaces(h *BareMetalHost) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for _, ref := range []struct {
		name string
		ref  *corev1.SecretReference
	}{{"userData", h.Spec.UserData}, {"networkData", h.Spec.NetworkData}, {"metaData", h.Spec.MetaData}} {
		if ref.ref != nil && ref.ref.Namespace != "" && ref.ref.Namespace != h.Namespace {
			errs = append(errs, field.Forbidden(spec.Child(ref.name, "namespace"),
				fmt.Sprintf("must be the BareMetalHost's namespace %q: a host may only use Secrets of its own namespace", h.Namespace)))
		}
	}
	return errs
}

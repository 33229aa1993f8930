package capicore

import (
	"k8s.io/apimachinery/pkg/runtime"

	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1" //nolint:staticcheck // still served: the conversion webhooks need it
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // still served: the conversion webhooks need it
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1" //nolint:staticcheck // still served: the conversion webhooks need it
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"   //nolint:staticcheck // still served: the conversion webhooks need it
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1" //nolint:staticcheck // still served: the conversion webhooks need it
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
)

// AddToScheme adds every Cluster API core type, in all served versions (the
// conversion webhooks need the old ones), to s.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clusterv1beta1.AddToScheme, clusterv1.AddToScheme,
		addonsv1beta1.AddToScheme, addonsv1.AddToScheme,
		runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
		ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

package metalcluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

// setStatus computes the status of mc from its spec: the infrastructure is
// provisioned once the control-plane endpoint is set, and stays provisioned
// (the contract forbids going back).
func setStatus(mc *infrav1.MetalCluster) {
	setReadyCondition(mc)
	if !mc.Spec.ControlPlaneEndpoint.IsZero() {
		mc.Status.Initialization.Provisioned = ptr.To(true)
	}
}

func setReadyCondition(mc *infrav1.MetalCluster) {
	if mc.Spec.ControlPlaneEndpoint.IsZero() {
		conditions.Set(mc, metav1.Condition{
			Type:    infrav1.MetalClusterReadyCondition,
			Status:  metav1.ConditionFalse,
			Reason:  infrav1.MetalClusterEndpointMissingReason,
			Message: "spec.controlPlaneEndpoint.host is empty: set it to the cluster's API VIP",
		})
		return
	}
	conditions.Set(mc, metav1.Condition{
		Type:    infrav1.MetalClusterReadyCondition,
		Status:  metav1.ConditionTrue,
		Reason:  infrav1.MetalClusterReadyReason,
		Message: "Control-plane endpoint " + mc.Spec.ControlPlaneEndpoint.Host + " is set",
	})
}

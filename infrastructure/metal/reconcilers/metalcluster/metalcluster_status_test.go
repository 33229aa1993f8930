package metalcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

func TestSetStatus(t *testing.T) {
	tests := []struct {
		name            string
		endpoint        infrav1.APIEndpoint
		wasProvisioned  bool
		wantProvisioned bool
		wantReady       metav1.ConditionStatus
		wantReason      string
	}{
		{name: "no endpoint", wantReady: metav1.ConditionFalse, wantReason: infrav1.MetalClusterEndpointMissingReason},
		{name: "endpoint set", endpoint: infrav1.APIEndpoint{Host: "192.0.2.1", Port: 6443}, wantProvisioned: true,
			wantReady: metav1.ConditionTrue, wantReason: infrav1.MetalClusterReadyReason},
		{name: "endpoint removed after provisioning stays provisioned", wasProvisioned: true, wantProvisioned: true,
			wantReady: metav1.ConditionFalse, wantReason: infrav1.MetalClusterEndpointMissingReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := &infrav1.MetalCluster{Spec: infrav1.MetalClusterSpec{ControlPlaneEndpoint: tt.endpoint}}
			if tt.wasProvisioned {
				mc.Status.Initialization.Provisioned = new(true)
			}
			setStatus(mc)
			g.Expect(mc.Status.Initialization.Provisioned != nil && *mc.Status.Initialization.Provisioned).To(Equal(tt.wantProvisioned))
			c := conditions.Get(mc, infrav1.MetalClusterReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tt.wantReady))
			g.Expect(c.Reason).To(Equal(tt.wantReason))
		})
	}
}

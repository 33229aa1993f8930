package metalmachine

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

func setReady(mm *infrav1.MetalMachine, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(mm, metav1.Condition{Type: infrav1.MetalMachineReadyCondition, Status: status, Reason: reason, Message: msg})
}

// setStatusFromHost reports the host's progress; provisioned never goes
// back to false (the contract forbids it).
func setStatusFromHost(mm *infrav1.MetalMachine, host *metal3v1.BareMetalHost) {
	st := host.Status
	switch {
	case st.Provisioning.State == metal3v1.StateProvisioned:
		// The providerID comes with provisioning: Cluster API takes a
		// providerID as "Provisioned".
		if mm.Spec.ProviderID == "" {
			mm.Spec.ProviderID = ProviderID(host, mm)
		}
		mm.Status.Initialization.Provisioned = ptr.To(true)
		mm.Status.Addresses = addresses(host)
		setReady(mm, metav1.ConditionTrue, infrav1.HostProvisionedReason, "BareMetalHost "+host.Name+" runs the image")
	case st.ErrorType != "":
		setReady(mm, metav1.ConditionFalse, infrav1.HostErrorReason, fmt.Sprintf("BareMetalHost %s: %s: %s", host.Name, st.ErrorType, st.ErrorMessage))
	default:
		setReady(mm, metav1.ConditionFalse, infrav1.HostProvisioningReason, fmt.Sprintf("BareMetalHost %s is %s", host.Name, st.Provisioning.State))
	}
}

// addresses are the host's NIC IPs and its hostname.
func addresses(host *metal3v1.BareMetalHost) []clusterv1.MachineAddress {
	var out []clusterv1.MachineAddress
	if hw := host.Status.HardwareDetails; hw != nil {
		for _, n := range hw.NIC {
			if n.IP != "" {
				out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: n.IP})
			}
		}
	}
	out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: host.Name})
	return out
}

package infraenv

import (
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// Finalizer keeps an InfraEnv until the service has released it. Its
// image URLs die with it (they name its UID) and its Agents are owned by
// it (Kubernetes' garbage collector deletes them), so releasing is
// removing the finalizer: deleting an InfraEnv deletes nothing else.
const Finalizer = "infraenv.agent-install.openshift.io/ai-deprovision"

// reconcileDelete releases a deleted InfraEnv (End writes it).
func reconcileDelete(ie *agentinstallv1.InfraEnv) {
	controllerutil.RemoveFinalizer(ie, Finalizer)
}

package openshiftcontrolplane

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
)

// updateStatus fills the contract's replica counts from the masters.
func (r *Reconciler) updateStatus(s *scope) {
	cp := s.cp
	ms := s.masters()
	var replicas, upToDate, available int32
	for _, m := range ms {
		replicas++
		if m.Spec.Version == cp.Spec.Version {
			upToDate++
		}
		if conditions.IsTrue(m, clusterv1.MachineAvailableCondition) {
			available++
		}
	}
	cp.Status.Replicas = ptr.To(replicas)
	cp.Status.UpToDateReplicas = ptr.To(upToDate)
	cp.Status.ReadyReplicas = ptr.To(int32(readyMasters(ms))) //nolint:gosec // at most the masters listed
	cp.Status.AvailableReplicas = ptr.To(available)
	// The masters: the bootstrap Machine carries the control-plane label
	// too (Cluster API must delete it with the control plane), not a replica.
	cp.Status.Selector = fmt.Sprintf("%s=%s,%s,!%s", clusterv1.ClusterNameLabel, s.cluster.Name,
		clusterv1.MachineControlPlaneLabel, controlplanev1.BootstrapMachineLabel)
	if ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false) {
		cp.Status.Version = cp.Spec.Version
		cp.Status.DistributionVersion = cp.Spec.DistributionVersion
	}
	if cp.Status.BootstrapPhase == "" {
		cp.Status.BootstrapPhase = controlplanev1.BootstrapPhasePending
	}
	if conditions.Get(cp, controlplanev1.AvailableCondition) == nil {
		setCondition(cp, controlplanev1.AvailableCondition, metav1.ConditionFalse, controlplanev1.WaitingForBootstrapReason,
			"The control plane is not initialized yet")
	}
}

// reconcileDelete deletes the bootstrap Machine and the masters, and lets
// the control plane go once they are gone. Cluster API deletes the
// workers before it deletes the control plane.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	setCondition(s.cp, controlplanev1.AvailableCondition, metav1.ConditionFalse, controlplanev1.DeletingReason,
		"Deleting the control plane")
	if len(s.machines) == 0 {
		controllerutil.RemoveFinalizer(s.cp, controlplanev1.OpenShiftControlPlaneFinalizer)
		return ctrl.Result{}, nil
	}
	// The bootstrap Machine first, then the masters.
	victims := s.machines
	if bm := s.bootstrapMachine(); bm != nil {
		victims = []*clusterv1.Machine{bm}
	}
	for _, m := range victims {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		log.Info("Deleting control-plane Machine", "machine", m.Name)
	}
	return ctrl.Result{}, nil // the Machines' deletion wakes us
}

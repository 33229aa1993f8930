package openshiftcontrolplane

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	"github.com/metalshift/metalshift/internal/shard"
)

// reconcileBootstrap runs the control plane up to its initialization:
// bootstrap Machine, API served by the bootstrap node, masters, bootstrap complete.
func (r *Reconciler) reconcileBootstrap(ctx context.Context, s *scope) (ctrl.Result, error) {
	cp := s.cp
	bm := s.bootstrapMachine()
	if bm == nil {
		if cp.Status.BootstrapPhase == controlplanev1.BootstrapPhaseRemoved {
			return ctrl.Result{}, nil
		}
		m, err := r.createMachine(ctx, s, s.cluster.Name+"-bootstrap", bootstrapv1.RoleBootstrap)
		if err != nil {
			return ctrl.Result{}, err
		}
		cp.Status.BootstrapPhase = controlplanev1.BootstrapPhaseProvisioning
		cp.Status.BootstrapMachine = m.Name
		setCondition(cp, controlplanev1.MachinesCreatedCondition, metav1.ConditionTrue, controlplanev1.MachinesCreatedReason,
			"Created bootstrap Machine "+m.Name+"; the masters follow once it serves the API")
		setCondition(cp, controlplanev1.BootstrapReadyCondition, metav1.ConditionFalse, controlplanev1.BootstrapMachineCreatedReason,
			"Created bootstrap Machine "+m.Name)
		r.event(cp, corev1.EventTypeNormal, controlplanev1.BootstrapMachineCreatedReason, "Created bootstrap Machine %s", m.Name)
		return ctrl.Result{}, nil
	}
	cp.Status.BootstrapMachine = bm.Name
	endpoint := endpointURL(s.cluster)
	w := r.Workload(client.ObjectKeyFromObject(s.cluster))
	if err := w.Ready(ctx); err != nil {
		cp.Status.BootstrapPhase = controlplanev1.BootstrapPhaseProvisioning
		reason, msg := controlplanev1.BootstrapProvisioningReason, bootstrapProgress(bm)
		if bm.Status.GetTypedPhase() == clusterv1.MachinePhaseProvisioned || bm.Status.GetTypedPhase() == clusterv1.MachinePhaseRunning {
			// The API comes up minutes after the node boots: only a
			// silence beyond the grace period is a problem.
			since, grace := provisionedAt(bm), r.bootstrapAPIGrace()
			reason = controlplanev1.WaitingForBootstrapAPIReason
			msg = fmt.Sprintf("Bootstrap Machine %s is provisioned%s; waiting for its API at %s (%v)", bm.Name, sinceText(since), endpoint, err)
			if !since.IsZero() && time.Since(since) > grace {
				reason = controlplanev1.BootstrapNotServingReason
				msg = fmt.Sprintf("Bootstrap Machine %s is provisioned%s, but the API at %s has not answered for more than %s: %v",
					bm.Name, sinceText(since), endpoint, grace, err)
				if c := conditions.Get(cp, controlplanev1.BootstrapReadyCondition); c == nil || c.Reason != reason {
					r.event(cp, corev1.EventTypeWarning, reason, "%s", msg)
				}
			}
		}
		setCondition(cp, controlplanev1.BootstrapReadyCondition, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{RequeueAfter: waitShort}, nil
	}
	if cp.Status.BootstrapPhase != controlplanev1.BootstrapPhaseServing {
		r.event(cp, corev1.EventTypeNormal, controlplanev1.BootstrapServingReason, "The bootstrap node serves the API at %s", endpoint)
	}
	cp.Status.BootstrapPhase = controlplanev1.BootstrapPhaseServing
	setCondition(cp, controlplanev1.BootstrapReadyCondition, metav1.ConditionTrue, controlplanev1.BootstrapServingReason,
		"Bootstrap Machine "+bm.Name+" serves the API at "+endpoint)

	if err := r.scaleUp(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	joined := 0
	var nodes map[string]bool
	for _, m := range s.masters() {
		if m.Status.NodeRef.IsDefined() {
			joined++
			continue
		}
		// Cluster API sets a Machine's nodeRef when it reconciles the
		// Machine, but it watches the cluster's Nodes only once the control
		// plane is initialized: a master whose Node registered after its
		// Machine's last reconcile would wait for an event that never
		// comes. Its Node is looked for here, by the Machine's providerID.
		if m.Spec.ProviderID == "" {
			continue
		}
		if nodes == nil {
			var err error
			if nodes, err = w.NodeProviderIDs(ctx); err != nil {
				nodes = map[string]bool{} // looked for again at the next requeue
			}
		}
		if nodes[m.Spec.ProviderID] {
			joined++
		}
	}
	want := cp.DesiredReplicas()
	complete, err := w.BootstrapComplete(ctx)
	if err != nil || !complete || joined < want {
		msg := fmt.Sprintf("%d of %d masters joined the cluster", joined, want)
		if err != nil {
			msg += "; reading the bootstrap status: " + err.Error()
		} else if !complete {
			msg += "; the bootstrap node has not reported the bootstrap complete yet"
		}
		setCondition(cp, controlplanev1.ControlPlaneInitializedCondition, metav1.ConditionFalse, controlplanev1.WaitingForMastersReason, msg)
		return ctrl.Result{RequeueAfter: waitShort}, nil
	}
	cp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	setCondition(cp, controlplanev1.ControlPlaneInitializedCondition, metav1.ConditionTrue, controlplanev1.InitializedReason,
		fmt.Sprintf("%d masters joined and the bootstrap is complete", joined))
	r.event(cp, corev1.EventTypeNormal, controlplanev1.InitializedReason, "Control plane initialized: %d masters joined; removing the bootstrap node", joined)
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// reconcileInitialized removes the bootstrap Machine and keeps the masters at spec.replicas.
func (r *Reconciler) reconcileInitialized(ctx context.Context, s *scope) (ctrl.Result, error) {
	cp := s.cp
	if bm := s.bootstrapMachine(); bm != nil {
		cp.Status.BootstrapPhase = controlplanev1.BootstrapPhaseRemoving
		setCondition(cp, controlplanev1.BootstrapRemovedCondition, metav1.ConditionFalse, controlplanev1.BootstrapDeletingReason,
			"Deleting bootstrap Machine "+bm.Name+"; its host returns to the pool")
		if bm.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, bm); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			r.event(cp, corev1.EventTypeNormal, controlplanev1.BootstrapDeletingReason, "Deleting bootstrap Machine %s", bm.Name)
		}
	} else {
		if cp.Status.BootstrapPhase != controlplanev1.BootstrapPhaseRemoved {
			// Its install-config and pull secret copy is of no use any more.
			ic := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cp.Namespace, Name: s.cluster.Name + bootstrapInstallConfigSuffix}}
			if err := r.Client.Delete(ctx, ic); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("deleting Secret %s: %w", ic.Name, err)
			}
		}
		cp.Status.BootstrapPhase = controlplanev1.BootstrapPhaseRemoved
		setCondition(cp, controlplanev1.BootstrapRemovedCondition, metav1.ConditionTrue, controlplanev1.BootstrapRemovedReason, "The bootstrap Machine is gone")
	}
	if err := r.scaleUp(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.scaleDown(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	err := r.Workload(client.ObjectKeyFromObject(s.cluster)).Ready(ctx)
	ready := readyMasters(s.masters())
	switch {
	case err != nil:
		setCondition(cp, controlplanev1.AvailableCondition, metav1.ConditionFalse, controlplanev1.APINotAnsweringReason,
			fmt.Sprintf("The API at %s does not answer: %v", endpointURL(s.cluster), err))
		return ctrl.Result{RequeueAfter: waitShort}, nil
	case ready == 0:
		setCondition(cp, controlplanev1.AvailableCondition, metav1.ConditionFalse, controlplanev1.WaitingForMastersReason, "No master Node is Ready")
	default:
		setCondition(cp, controlplanev1.AvailableCondition, metav1.ConditionTrue, controlplanev1.ReadyReason,
			fmt.Sprintf("The API answers at %s; %d masters Ready", endpointURL(s.cluster), ready))
	}
	return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
}

// scaleUp creates masters until spec.replicas exist (not counting those being deleted).
func (r *Reconciler) scaleUp(ctx context.Context, s *scope) error {
	want := s.cp.DesiredReplicas()
	used := map[string]bool{}
	have := 0
	for _, m := range s.masters() {
		used[m.Name] = true
		if m.DeletionTimestamp.IsZero() {
			have++
		}
	}
	for i := 0; have < want; i++ {
		name := s.cluster.Name + "-master-" + strconv.Itoa(i)
		if used[name] {
			continue
		}
		m, err := r.createMachine(ctx, s, name, bootstrapv1.RoleMaster)
		if err != nil {
			return err
		}
		s.machines = append(s.machines, m)
		r.event(s.cp, corev1.EventTypeNormal, controlplanev1.ScalingReason, "Created master Machine %s", name)
		have++
	}
	setCondition(s.cp, controlplanev1.MachinesCreatedCondition, metav1.ConditionTrue, controlplanev1.MachinesCreatedReason,
		fmt.Sprintf("%d of %d masters exist", have, want))
	return nil
}

// scaleDown deletes one master at a time while more than spec.replicas
// exist: first one without a Node, else the newest. Cluster API drains it.
func (r *Reconciler) scaleDown(ctx context.Context, s *scope) error {
	want := s.cp.DesiredReplicas()
	var live []*clusterv1.Machine
	for _, m := range s.masters() {
		if !m.DeletionTimestamp.IsZero() {
			return nil // one at a time
		}
		live = append(live, m)
	}
	if len(live) <= want {
		return nil
	}
	sort.SliceStable(live, func(i, j int) bool {
		if a, b := live[i].Status.NodeRef.IsDefined(), live[j].Status.NodeRef.IsDefined(); a != b {
			return !a
		}
		return live[i].CreationTimestamp.After(live[j].CreationTimestamp.Time)
	})
	victim := live[0]
	if err := r.Client.Delete(ctx, victim); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.event(s.cp, corev1.EventTypeNormal, controlplanev1.ScalingReason, "Deleting master Machine %s (%d masters wanted)", victim.Name, want)
	return nil
}

// createMachine creates an OpenShiftConfig, the infrastructure cloned from
// the template, and the Machine that binds them, owned by the control plane.
func (r *Reconciler) createMachine(ctx context.Context, s *scope, name, role string) (*clusterv1.Machine, error) {
	cp, cluster := s.cp, s.cluster
	spec, err := r.configSpec(ctx, s, role)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
	maps.Copy(labels, cp.Spec.MachineTemplate.ObjectMeta.Labels)
	if v, ok := cp.Labels[shard.Label]; ok {
		labels[shard.Label] = v // its Machines are reconciled by its manager
	}
	// The bootstrap Machine runs the temporary control plane: it is a
	// control-plane Machine to Cluster API (which otherwise would wait for
	// it, as for a worker, before deleting the control plane), told apart
	// by its own label.
	labels[clusterv1.MachineControlPlaneLabel] = ""
	if role == bootstrapv1.RoleBootstrap {
		labels[controlplanev1.BootstrapMachineLabel] = ""
	}
	owner := metav1.NewControllerRef(cp, controlplanev1.GroupVersion.WithKind("OpenShiftControlPlane"))
	// The config and the infrastructure get a plain owner reference: their
	// Machine becomes their controller, as the contract expects.
	plain := *owner
	plain.Controller, plain.BlockOwnerDeletion = nil, nil

	tref := cp.Spec.MachineTemplate.Spec.InfrastructureRef
	mapping, err := r.Client.RESTMapper().RESTMapping(tref.GroupKind())
	if err != nil {
		return nil, fmt.Errorf("spec.machineTemplate.spec.infrastructureRef %s: %w", tref.Kind, err)
	}
	_, infraRef, err := external.CreateFromTemplate(ctx, &external.CreateFromTemplateInput{
		Client: r.Client,
		TemplateRef: &corev1.ObjectReference{
			APIVersion: mapping.GroupVersionKind.GroupVersion().String(), Kind: tref.Kind, Namespace: cp.Namespace, Name: tref.Name,
		},
		Namespace: cp.Namespace, Name: name, ClusterName: cluster.Name, OwnerRef: &plain, Labels: labels,
		Annotations: cp.Spec.MachineTemplate.ObjectMeta.Annotations,
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("cloning %s %s for Machine %s: %w", tref.Kind, tref.Name, name, err)
	}
	if err != nil {
		infraRef = clusterv1.ContractVersionedObjectReference{APIGroup: tref.APIGroup, Kind: strings.TrimSuffix(tref.Kind, "Template"), Name: name}
	}
	cfg := &bootstrapv1.OpenShiftConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cp.Namespace, Labels: labels, OwnerReferences: []metav1.OwnerReference{plain}},
		Spec:       spec,
	}
	if err := r.Client.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating OpenShiftConfig %s: %w", name, err)
	}
	del := cp.Spec.MachineTemplate.Spec.Deletion
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cp.Namespace, Labels: labels, Annotations: cp.Spec.MachineTemplate.ObjectMeta.Annotations,
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster.Name,
			Version:     cp.Spec.Version,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "OpenShiftConfig", Name: name,
			}},
			InfrastructureRef: infraRef,
			Deletion: clusterv1.MachineDeletionSpec{
				NodeDrainTimeoutSeconds:        del.NodeDrainTimeoutSeconds,
				NodeVolumeDetachTimeoutSeconds: del.NodeVolumeDetachTimeoutSeconds,
				NodeDeletionTimeoutSeconds:     del.NodeDeletionTimeoutSeconds,
			},
		},
	}
	if err := r.Client.Create(ctx, m); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return m, r.Client.Get(ctx, client.ObjectKeyFromObject(m), m)
		}
		return nil, fmt.Errorf("creating Machine %s: %w", name, err)
	}
	return m, nil
}

func endpointURL(c *clusterv1.Cluster) string {
	return fmt.Sprintf("https://%s:%d", c.Spec.ControlPlaneEndpoint.Host, c.Spec.ControlPlaneEndpoint.Port)
}

// bootstrapProgress says where the bootstrap Machine is, with the reason
// of its first false condition.
func bootstrapProgress(m *clusterv1.Machine) string {
	msg := fmt.Sprintf("Bootstrap Machine %s is %s", m.Name, orDefault(m.Status.Phase, "Pending"))
	for _, t := range []string{clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.MachineInfrastructureReadyCondition} {
		if c := conditions.Get(m, t); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
			return msg + ": " + c.Message
		}
	}
	return msg
}

// provisionedAt is when the Machine's infrastructure became ready; zero
// when unknown.
func provisionedAt(m *clusterv1.Machine) time.Time {
	if c := conditions.Get(m, clusterv1.MachineInfrastructureReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

func sinceText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " since " + t.UTC().Format(time.RFC3339)
}

func readyMasters(ms []*clusterv1.Machine) int {
	n := 0
	for _, m := range ms {
		if m.Status.NodeRef.IsDefined() && conditions.IsTrue(m, clusterv1.MachineNodeReadyCondition) {
			n++
		}
	}
	return n
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

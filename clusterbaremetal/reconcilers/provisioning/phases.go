package provisioning

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/provisioning"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// AppliedAtAnnotation on the metal3 Deployment is when the operator last
// wrote it (RFC 3339); the rollout timeout counts from there.
const AppliedAtAnnotation = "metalshift.io/applied-at"

// run decides what to report (s.rep), in upstream's order: platform,
// Provisioning, pause, deletion, finalizer, validation, then the phases:
// the signing key, the deploy server's TLS, the Deployment, its rollout.
func (r *Reconciler) run(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !provisioning.Enabled(s.platform) {
		s.rep = &report{reason: ReasonUnsupportedPlatform, message: MessageUnsupportedPlatform}
		return ctrl.Result{}, nil
	}
	prov := &metal3v1.Provisioning{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: metal3v1.ProvisioningSingletonName}, prov); apierrors.IsNotFound(err) {
		s.rep = &report{reason: ReasonWaitingForProvisioningCR, message: MessageWaiting}
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	s.prov = prov
	if _, paused := prov.Annotations[metal3v1.ProvisioningPausedAnnotation]; paused {
		log.Info("Provisioning CR paused", "annotation", metal3v1.ProvisioningPausedAnnotation)
		return ctrl.Result{RequeueAfter: pausedRequeue}, nil
	}
	var err error
	if s.provRun, err = reconciler.Start(r.Client, prov); err != nil {
		return ctrl.Result{}, err
	}
	if !prov.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}
	controllerutil.AddFinalizer(prov, metal3v1.ProvisioningFinalizer)
	if err := provisioning.Validate(&prov.Spec, provisioning.AllowedModes(s.platform)); err != nil {
		r.Recorder.Eventf(prov, nil, corev1.EventTypeWarning, ReasonInvalidConfiguration, "Validate", "%s", err.Error())
		// A user fixes the spec; retrying would change nothing.
		s.rep = &report{reason: ReasonInvalidConfiguration, message: err.Error(), progress: MessageInvalid}
		return ctrl.Result{}, nil
	}
	return reconciler.Phases(ctx, s, r.ensureSigningKey, r.ensureDeployTLS, r.ensureDeployment, r.reportRollout)
}

// platform reads the cluster's platform from the Infrastructure "cluster".
// Without one the operator cannot tell whether to act: it retries (upstream
// exits).
func (r *Reconciler) platform(ctx context.Context) (configv1.PlatformType, error) {
	infra := &configv1.Infrastructure{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: configv1.InfrastructureName}, infra); err != nil {
		return "", fmt.Errorf("reading the Infrastructure %q, which tells the platform: %w", configv1.InfrastructureName, err)
	}
	return infra.Status.Type(), nil
}

// ensureSigningKey creates the operand's signing key once; it is never
// rotated, so that the URLs hosts hold stay valid.
func (r *Reconciler) ensureSigningKey(ctx context.Context, _ *scope) (ctrl.Result, error) {
	_, err := r.ensureSecret(ctx, metal3.SigningKeySecret, corev1.SecretTypeOpaque, func() (map[string][]byte, error) {
		data := make([]byte, 48)
		if _, err := rand.Read(data); err != nil {
			return nil, err
		}
		return map[string][]byte{metal3.SigningKeyKey: data}, nil
	})
	return ctrl.Result{}, err
}

// ensureDeployTLS makes the deploy server's CA once (never rotated: hosts
// hold it), and issues the deploy server's certificate for the addresses
// hosts may reach it at (metal3.ServingIPs) when it is missing, no longer
// holds exactly them, or is due for renewal. It returns how long until the
// certificate is due.
func (r *Reconciler) ensureDeployTLS(ctx context.Context, s *scope) (ctrl.Result, error) {
	renewIn, err := r.deployTLS(ctx, s)
	return ctrl.Result{RequeueAfter: renewIn}, err
}

func (r *Reconciler) deployTLS(ctx context.Context, s *scope) (time.Duration, error) {
	now := r.Clock.Now()
	ca, err := r.ensureSecret(ctx, metal3.DeployCASecret, corev1.SecretTypeTLS, func() (map[string][]byte, error) { return metal3.NewDeployCA(now) })
	if err != nil {
		return 0, fmt.Errorf("the deploy server's CA: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.HasLabels{metal3.ControlPlaneLabel}); err != nil {
		return 0, err
	}
	ips := metal3.ServingIPs(&s.prov.Spec, nodes.Items)
	issue := func() (map[string][]byte, error) { return metal3.IssueDeployTLS(ca.Data, ips, now) }
	current, err := r.ensureSecret(ctx, metal3.DeployTLSSecret, corev1.SecretTypeTLS, issue)
	if err != nil {
		return 0, fmt.Errorf("the deploy server's certificate: %w", err)
	}
	renewAt, ok := metal3.DeployTLSRenewal(current.Data, ca.Data, ips, now)
	if ok {
		return renewAt.Sub(now), nil
	}
	if current.Data, err = issue(); err != nil {
		return 0, fmt.Errorf("the deploy server's certificate: %w", err)
	}
	if err := r.Client.Update(ctx, current); err != nil {
		return 0, err
	}
	ctrl.LoggerFrom(ctx).Info("Issued the deploy server's certificate", "secret", klog.KObj(current), "addresses", ips)
	if renewAt, ok = metal3.DeployTLSRenewal(current.Data, ca.Data, ips, now); !ok {
		return 0, errors.New("the deploy server's certificate just issued does not serve")
	}
	return renewAt.Sub(now), nil
}

// ensureSecret returns the Secret name in openshift-machine-api, created
// with the data newData makes when there is none.
func (r *Reconciler) ensureSecret(ctx context.Context, name string, typ corev1.SecretType, newData func() (map[string][]byte, error)) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: metal3.Namespace, Name: name}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	if !apierrors.IsNotFound(err) {
		return secret, err
	}
	data, err := newData()
	if err != nil {
		return nil, err
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: typ, Data: data}
	if err := r.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
		return secret, r.Client.Get(ctx, key, secret)
	} else if err != nil {
		return nil, err
	}
	return secret, nil
}

// ensureDeployment applies the metal3 Deployment; while another owner
// (not the machine-api operator) holds it, or it is being replaced, it
// reports syncing.
func (r *Reconciler) ensureDeployment(ctx context.Context, s *scope) (ctrl.Result, error) {
	standDown, err := r.applyDeployment(ctx, s)
	switch {
	case err != nil:
	case standDown:
		s.rep = &report{reason: ReasonSyncing, progress: MessageStandingDown}
	case s.deployment == nil: // being replaced: its deletion wakes us
		s.rep = &report{reason: ReasonSyncing, progress: r.progressMessage(s)}
	}
	return ctrl.Result{}, err
}

// applyDeployment creates or updates the metal3 Deployment, which then is
// s.deployment. A Deployment without the owned annotation that the
// machine-api operator left is claimed (the annotation set) and managed
// from then on; any other without it has another owner, and the operator
// stands down (true) until that owner adds the annotation. An owned
// Deployment is taken over, replaced when its selector (immutable) is not
// the operator's.
func (r *Reconciler) applyDeployment(ctx context.Context, s *scope) (bool, error) {
	desired := metal3.Deployment(s.prov, r.Operand)
	if err := controllerutil.SetControllerReference(s.prov, desired, r.Client.Scheme()); err != nil {
		return false, err
	}
	desired.Annotations[AppliedAtAnnotation] = r.Clock.Now().UTC().Format(time.RFC3339)
	current := &appsv1.Deployment{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), current)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, desired); err != nil {
			return false, err
		}
		s.deployment = desired
		return false, nil
	case err != nil:
		return false, err
	}
	if _, owned := current.Annotations[metal3.OwnedAnnotation]; !owned {
		if !metal3.LeftByMachineAPI(current) {
			return true, nil
		}
		if err := r.claimDeployment(ctx, s, current); err != nil {
			return false, err
		}
	}
	if !equality.Semantic.DeepEqual(current.Spec.Selector, desired.Spec.Selector) {
		ctrl.LoggerFrom(ctx).Info("Replacing the metal3 Deployment handed over with another selector")
		return false, client.IgnoreNotFound(r.Client.Delete(ctx, current, client.Preconditions{UID: &current.UID}))
	}
	s.deployment = current
	if current.Annotations[metal3.SpecHashAnnotation] == desired.Annotations[metal3.SpecHashAnnotation] && metav1.IsControlledBy(current, s.prov) {
		return false, nil
	}
	for k, v := range desired.Labels {
		metav1.SetMetaDataLabel(&current.ObjectMeta, k, v)
	}
	for k, v := range desired.Annotations {
		metav1.SetMetaDataAnnotation(&current.ObjectMeta, k, v)
	}
	current.OwnerReferences = desired.OwnerReferences
	current.Spec = desired.Spec
	return false, r.Client.Update(ctx, current)
}

// claimDeployment takes over d, the metal3 Deployment the machine-api
// operator left: it swaps that operator's ownership annotation for
// OwnedAnnotation (the rest of applyDeployment then manages d as the
// operator's own) and records an Event on the Provisioning.
func (r *Reconciler) claimDeployment(ctx context.Context, s *scope, d *appsv1.Deployment) error {
	delete(d.Annotations, metal3.MachineAPIOwnedAnnotation)
	metav1.SetMetaDataAnnotation(&d.ObjectMeta, metal3.OwnedAnnotation, "")
	if err := r.Client.Update(ctx, d); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Claimed the metal3 Deployment the machine-api operator left")
	r.Recorder.Eventf(s.prov, d, corev1.EventTypeNormal, ReasonClaimed, "Claim",
		"claimed the %s/%s Deployment the machine-api operator left", d.Namespace, d.Name)
	return nil
}

// reportRollout records on the Provisioning the generation acted on and
// the Deployment's generation after the operator's write, and reports the
// rollout; nothing while there is no Deployment of the operator's.
func (r *Reconciler) reportRollout(_ context.Context, s *scope) (ctrl.Result, error) {
	if s.deployment == nil {
		return ctrl.Result{}, nil
	}
	s.prov.Status.ObservedGeneration = s.prov.Generation
	s.prov.Status.Generations = []metal3v1.GenerationStatus{{
		Group: "apps", Resource: "deployments", Namespace: metal3.Namespace, Name: metal3.DeploymentName,
		LastGeneration: s.deployment.Generation,
	}}
	rep, requeue := r.rollout(s)
	s.rep = &rep
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// rollout reports the Deployment's rollout: DeployComplete once its
// controller says every replica of the current generation is available,
// else SyncingResources, then DeployTimedOut after RolloutTimeout since the
// operator's last write (checked again then).
func (r *Reconciler) rollout(s *scope) (report, time.Duration) {
	if metal3.RolledOut(s.deployment) {
		return report{reason: ReasonDeployComplete, message: MessageDeployComplete}, 0
	}
	progress := r.progressMessage(s)
	appliedAt, err := time.Parse(time.RFC3339, s.deployment.Annotations[AppliedAtAnnotation])
	if err != nil {
		appliedAt = r.Clock.Now() // not written by this operator: count from now
	}
	left := r.RolloutTimeout - r.Clock.Since(appliedAt)
	if left <= 0 {
		return report{reason: ReasonDeployTimedOut, message: MessageTimedOut, progress: progress}, 0
	}
	return report{reason: ReasonSyncing, progress: progress}, left
}

// progressMessage says why the operator is progressing: an upgrade when it
// reported another version before, else applying.
func (r *Reconciler) progressMessage(s *scope) string {
	for _, v := range s.co.Status.Versions {
		if v.Name == "operator" && v.Version != r.Operand.Version {
			return MessageUpgraded
		}
	}
	return MessageApplying
}

// reconcileDelete removes what the operator deployed (not a Deployment
// another owner holds), reports it, and lets the Provisioning go once the
// report is written.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	s.rep = &report{reason: ReasonResourceNotFound, progress: MessageDeleted}
	if !controllerutil.ContainsFinalizer(s.prov, metal3v1.ProvisioningFinalizer) {
		return nil
	}
	d := &appsv1.Deployment{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeploymentName}, d)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, owned := d.Annotations[metal3.OwnedAnnotation]; err == nil && owned {
		if err := r.Client.Delete(ctx, d, client.Preconditions{UID: &d.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(s.prov, metal3v1.ProvisioningFinalizer)
	return nil
}

// ensureClusterOperator returns the baremetal ClusterOperator, creating it
// as upstream's manifest does when it is missing.
func (r *Reconciler) ensureClusterOperator(ctx context.Context) (*configv1.ClusterOperator, error) {
	co := &configv1.ClusterOperator{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: ClusterOperatorName}, co)
	if !apierrors.IsNotFound(err) {
		return co, err
	}
	co = &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: ClusterOperatorName, Annotations: clusterOperatorAnnotations}}
	if err := r.Client.Create(ctx, co); err != nil {
		return nil, err
	}
	return co, nil
}

// setClusterOperatorStatus sets the ClusterOperator's status for rep (End
// writes it when it changed): the conditions, the related objects, and
// the operator's version once it has settled at it. The operator is the
// only writer of this status.
func (r *Reconciler) setClusterOperatorStatus(ctx context.Context, co *configv1.ClusterOperator, rep report) {
	before := co.Status.DeepCopy()
	co.Status.Conditions = setConditions(co.Status.Conditions, conditions(rep), r.Clock.Now())
	co.Status.RelatedObjects = relatedObjects()
	if settled(rep) {
		co.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: r.Operand.Version}}
	}
	if !equality.Semantic.DeepEqual(*before, co.Status) {
		ctrl.LoggerFrom(ctx).Info("ClusterOperator status", "reason", rep.reason, "message", rep.message, "progress", rep.progress)
	}
}

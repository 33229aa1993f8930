// Package preprovisioningimage is the agent-based install's
// PreprovisioningImage provider (the converged flow): the image of a
// BareMetalHost labelled for an InfraEnv is that InfraEnv's discovery ISO,
// made for the converged flow (annotated enable-ironic-agent: its agent
// finds its host at the host engine and installs when the host's custom
// deploy start_assisted_install runs). It writes the image's status and
// annotates InfraEnvs; it never touches hosts or images of other
// providers.
package preprovisioningimage

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/reconcilers/infraenv"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// Finalizer is upstream's on the PreprovisioningImages it serves.
const Finalizer = "preprovisioningimage.agent-install.openshift.io/ai-deprovision"

// Reasons of the Ready condition, upstream's.
const (
	// ReasonInfraEnvAvailable: status.imageUrl is the InfraEnv's ISO.
	ReasonInfraEnvAvailable = "InfraEnvAvailable"
	// ReasonWaitingForInfraEnvImage: the InfraEnv, or its converged-flow
	// image, is not there yet.
	ReasonWaitingForInfraEnvImage = "WaitingForInfraEnvImageToBeCreated"
	// ReasonInfraEnvArchMismatch: the host's architecture is not the
	// InfraEnv's.
	ReasonInfraEnvArchMismatch = "InfraEnvArchMismatch"
)

// Images tells the InfraEnv's image's configuration digest, which the
// InfraEnv records (infraenv.DigestAnnotation) once its URLs are for it:
// the agent service's server.
type Images interface {
	DiscoveryConfig(ctx context.Context, ie *agentinstallv1.InfraEnv) (deployapi.BootConfig, string, error)
}

// Reconciler serves the PreprovisioningImages of hosts labelled for an
// InfraEnv.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Images   Images
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages;preprovisioningimages/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=infraenvs,verbs=get;list;watch;update;patch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, opts controller.Options) error {
	return ctrl.ControllerManagedBy(mgr).
		// An image is its host's shard's (checked in Reconcile): its own
		// label follows the host's, a moment later.
		For(&metal3v1.PreprovisioningImage{}).
		Watches(&metal3v1.BareMetalHost{}, &handler.EnqueueRequestForObject{}, // a label added later: the PreprovisioningImage of its name
			ctrl.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&agentinstallv1.InfraEnv{}, handler.EnqueueRequestsFromMapFunc(r.imagesOfInfraEnv)).
		WithOptions(opts).
		Named("preprovisioningimage").
		Complete(r)
}

// imagesOfInfraEnv are the images of the hosts labelled for the InfraEnv.
func (r *Reconciler) imagesOfInfraEnv(ctx context.Context, o client.Object) []reconcile.Request {
	hosts := &metal3v1.BareMetalHostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(o.GetNamespace()), client.MatchingLabels{agentinstallv1.InfraEnvNameLabel: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(hosts.Items))
	for i := range hosts.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
	}
	return reqs
}

// Reconcile serves one PreprovisioningImage. End writes what it changed:
// the finalizer, the status (this reconciler is its only writer; the host
// engine writes the spec).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, reterr error) {
	ppi := &metal3v1.PreprovisioningImage{}
	if err := r.Client.Get(ctx, req.NamespacedName, ppi); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	host := &metal3v1.BareMetalHost{}
	err := r.Client.Get(ctx, req.NamespacedName, host)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	// The image is served by its host's shard; by its own label's once
	// the host is gone.
	owner := client.Object(host)
	if err != nil {
		owner = ppi
	}
	if !shard.Owns(r.WatchFilterValue, owner) {
		return reconcile.Result{}, nil
	}
	run, rerr := reconciler.Start(r.Client, ppi)
	if rerr != nil {
		return reconcile.Result{}, rerr
	}
	ieName := host.Labels[agentinstallv1.InfraEnvNameLabel]
	if apierrors.IsNotFound(err) || ieName == "" || !ppi.DeletionTimestamp.IsZero() {
		// Not ours (or no longer): nothing to deprovision, let it go.
		controllerutil.RemoveFinalizer(ppi, Finalizer)
		run.End(ctx, &reterr)
		return reconcile.Result{}, reterr
	}
	controllerutil.AddFinalizer(ppi, Finalizer)
	before := ppi.Status.DeepCopy()
	reterr = r.serve(ctx, ppi, ieName)
	run.End(ctx, &reterr)
	if reterr == nil && run.Patched() && r.Recorder != nil && meta.IsStatusConditionTrue(ppi.Status.Conditions, metal3v1.ImageReadyCondition) &&
		!meta.IsStatusConditionTrue(before.Conditions, metal3v1.ImageReadyCondition) {
		r.Recorder.Eventf(ppi, corev1.EventTypeNormal, ReasonInfraEnvAvailable, "The image of InfraEnv %s serves host %s", ieName, host.Name)
	}
	return reconcile.Result{}, reterr
}

// serve fills the image's status from the InfraEnv: its ISO once it is a
// converged-flow image.
func (r *Reconciler) serve(ctx context.Context, ppi *metal3v1.PreprovisioningImage, ieName string) error {
	ie := &agentinstallv1.InfraEnv{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ppi.Namespace, Name: ieName}, ie); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		notReady(ppi, ReasonWaitingForInfraEnvImage, fmt.Sprintf("InfraEnv %s/%s not found", ppi.Namespace, ieName))
		return nil
	}
	if !agentinstallv1.ConvergedImage(ie) {
		patch := client.MergeFrom(ie.DeepCopy())
		if ie.Annotations == nil {
			ie.Annotations = map[string]string{}
		}
		ie.Annotations[agentinstallv1.EnableIronicAgentAnnotation] = "true"
		if err := r.Client.Patch(ctx, ie, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if want, have := arch(ie.Spec.CpuArchitecture), arch(ppi.Spec.Architecture); want != "" && have != "" && want != have {
		msg := fmt.Sprintf("InfraEnv %s is for %s hosts, the host is %s", ie.Name, ie.Spec.CpuArchitecture, ppi.Spec.Architecture)
		notReady(ppi, ReasonInfraEnvArchMismatch, msg)
		setCondition(ppi, metal3v1.ImageErrorCondition, metav1.ConditionTrue, ReasonInfraEnvArchMismatch, msg)
		return nil
	}
	_, digest, err := r.Images.DiscoveryConfig(ctx, ie)
	switch {
	case err != nil:
		notReady(ppi, ReasonWaitingForInfraEnvImage, "The InfraEnv's image cannot be made: "+err.Error())
		return nil
	case ie.Status.ISODownloadURL == "" || ie.Annotations[infraenv.DigestAnnotation] != digest:
		notReady(ppi, ReasonWaitingForInfraEnvImage, "Waiting for the InfraEnv's image to be created")
		return nil
	}
	ppi.Status.ImageUrl, ppi.Status.Format = ie.Status.ISODownloadURL, metal3v1.ImageFormatISO
	ppi.Status.KernelUrl, ppi.Status.ExtraKernelParams = "", ""
	ppi.Status.Architecture = ie.Spec.CpuArchitecture
	setCondition(ppi, metal3v1.ImageReadyCondition, metav1.ConditionTrue, ReasonInfraEnvAvailable, "Image has been created")
	setCondition(ppi, metal3v1.ImageErrorCondition, metav1.ConditionFalse, ReasonInfraEnvAvailable, "")
	return nil
}

// notReady withdraws the image, saying why.
func notReady(ppi *metal3v1.PreprovisioningImage, reason, msg string) {
	ppi.Status.ImageUrl, ppi.Status.KernelUrl, ppi.Status.ExtraKernelParams = "", "", ""
	setCondition(ppi, metal3v1.ImageReadyCondition, metav1.ConditionFalse, reason, msg)
	if reason != ReasonInfraEnvArchMismatch {
		setCondition(ppi, metal3v1.ImageErrorCondition, metav1.ConditionFalse, reason, "")
	}
}

func setCondition(ppi *metal3v1.PreprovisioningImage, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ppi.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: ppi.Generation})
}

// arch normalizes an architecture's spellings.
func arch(a string) string {
	switch a = strings.ToLower(a); a {
	case "amd64":
		return "x86_64"
	case "aarch64":
		return "arm64"
	}
	return a
}

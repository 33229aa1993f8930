// Package infraenv reconciles InfraEnvs: it mints the signed URLs of an
// InfraEnv's discovery image (ISO and iPXE artifacts), new ones with a new
// createdTime whenever what the image carries changes, and reports
// ImageCreated.
package infraenv

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// Annotations recording the current image: its digest and when its URLs expire.
const (
	DigestAnnotation  = "metalshift.io/discovery-image-digest"
	ExpiresAnnotation = "metalshift.io/discovery-image-expires"
)

// renewBefore is how long before its URLs expire an image gets new ones.
const renewBefore = 24 * time.Hour

// URLs are an image's signed URLs.
type URLs struct {
	ISO, IPXEScript, Kernel, Initrd string
	Expires                         time.Time
}

// Images makes discovery images: the agent service's server.
type Images interface {
	DiscoveryConfig(ctx context.Context, ie *agentinstallv1.InfraEnv) (deployapi.BootConfig, string, error)
	URLs(ie *agentinstallv1.InfraEnv, digest string, now time.Time) URLs
}

// Reconciler reconciles InfraEnvs.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	Images   Images
	// EventsURL signs events URLs (server.Server.EventsURL); nil leaves
	// status.debugInfo.eventsURL empty.
	EventsURL func(filters ...string) string
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=infraenvs;infraenvs/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=nmstateconfigs,verbs=get;list;watch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentinstallv1.InfraEnv{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&agentinstallv1.NMStateConfig{}, handler.EnqueueRequestsFromMapFunc(r.infraEnvsOfNamespace)).
		WithOptions(opts).
		Named("infraenv").
		Complete(r)
}

// infraEnvsOfNamespace wakes the InfraEnvs of the NMStateConfig's
// namespace, the only ones that may select it.
func (r *Reconciler) infraEnvsOfNamespace(ctx context.Context, o client.Object) []ctrl.Request {
	l := &agentinstallv1.InfraEnvList{}
	if err := r.Client.List(ctx, l, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(l.Items))
	for _, ie := range l.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&ie)})
	}
	return reqs
}

// Reconcile keeps an InfraEnv's image URLs current. End writes what it
// changed: the status under the lock (its conditions are a list the agent
// service adds to, ManualBootCondition, which a stale copy must not
// replace), then the annotations and the finalizer; a lost conflict is a
// requeue.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	ie := &agentinstallv1.InfraEnv{}
	if err := r.Client.Get(ctx, req.NamespacedName, ie); err != nil || !shard.Owns(r.WatchFilterValue, ie) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	run, err := reconciler.Start(r.Client, ie, reconciler.LockStatus())
	if err != nil {
		return ctrl.Result{}, err
	}
	url := ie.Status.ISODownloadURL
	defer func() {
		run.End(ctx, &reterr)
		res, reterr = reconciler.RequeueOnConflict(res, reterr)
		if run.Patched() && url != ie.Status.ISODownloadURL && ie.Status.ISODownloadURL != "" {
			r.Recorder.Event(ie, corev1.EventTypeNormal, "ImageCreated", "The discovery image was created")
		}
	}()
	if ie.DeletionTimestamp != nil {
		reconcileDelete(ie)
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(ie, Finalizer)
	now := r.Clock.Now()
	ie.Status.AgentLabelSelector = metav1.LabelSelector{MatchLabels: map[string]string{agentinstallv1.InfraEnvNameLabel: ie.Name}}
	if r.EventsURL != nil {
		ie.Status.InfraEnvDebugInfo.EventsURL = r.EventsURL("infra_env_id", string(ie.UID))
	}
	cond, requeue, err := r.image(ctx, ie, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	conditions.Set(&ie.Status.Conditions, now, cond)
	if !agentinstallv1.ConvergedImage(ie) {
		// A machine booted by hand waits no longer: the image is not the
		// converged flow's any more.
		ie.Status.Conditions = slices.DeleteFunc(ie.Status.Conditions, func(c agentinstallv1.Condition) bool {
			return string(c.Type) == conditions.ManualBootCondition
		})
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// image updates ie's image URLs and returns its ImageCreated condition. An
// InfraEnv bound to another namespace's ClusterDeployment has no image:
// its hosts would join a cluster that is not its tenant's.
func (r *Reconciler) image(ctx context.Context, ie *agentinstallv1.InfraEnv, now time.Time) (conditions.Cond, time.Duration, error) {
	if err := rec.InfraEnvClusterReference(ie); err != nil {
		clearImage(ie)
		return conditions.ImageCreated(err, true), 0, nil
	}
	if ref := ie.Spec.ClusterRef; ref != nil {
		cd := &hivev1.ClusterDeployment{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ie.Namespace, Name: ref.Name}, cd); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return conditions.Cond{}, 0, err
			}
			clearImage(ie)
			return conditions.Cond{Type: "ImageCreated", Status: corev1.ConditionUnknown, Reason: "MissingClusterDeployment",
				Message: "ClusterDeployment is missing: " + err.Error()}, 30 * time.Second, nil
		}
	}
	if _, err := rec.PullSecret(ctx, r.Client, ie.Namespace, ie.Spec.PullSecretRef); err != nil {
		clearImage(ie)
		return conditions.ImageCreated(err, ie.Spec.PullSecretRef == nil), 30 * time.Second, nil
	}
	_, digest, err := r.Images.DiscoveryConfig(ctx, ie)
	if err != nil {
		clearImage(ie)
		return conditions.ImageCreated(err, errors.Is(err, rec.ErrInput)), 0, nil
	}
	exp, _ := strconv.ParseInt(ie.Annotations[ExpiresAnnotation], 10, 64)
	if ie.Annotations[DigestAnnotation] != digest || ie.Status.ISODownloadURL == "" || time.Unix(exp, 0).Sub(now) < renewBefore {
		u := r.Images.URLs(ie, digest, now)
		if ie.Annotations == nil {
			ie.Annotations = map[string]string{}
		}
		ie.Annotations[DigestAnnotation] = digest
		ie.Annotations[ExpiresAnnotation] = strconv.FormatInt(u.Expires.Unix(), 10)
		ie.Status.ISODownloadURL = u.ISO
		ie.Status.BootArtifacts = agentinstallv1.BootArtifacts{KernelURL: u.Kernel, InitrdURL: u.Initrd, IpxeScriptURL: u.IPXEScript}
		t := metav1.NewTime(now)
		ie.Status.CreatedTime = &t
		exp = u.Expires.Unix()
	}
	return conditions.ImageCreated(nil, false), time.Unix(exp, 0).Sub(now) - renewBefore + time.Second, nil
}

func clearImage(ie *agentinstallv1.InfraEnv) {
	ie.Status.ISODownloadURL, ie.Status.CreatedTime = "", nil
	ie.Status.BootArtifacts = agentinstallv1.BootArtifacts{}
}

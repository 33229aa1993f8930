package openshiftcontrolplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"

	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/internal/metrics"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// Reconciler reconciles OpenShiftControlPlanes.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	// ClusterCache holds the hub's connections to the installed clusters,
	// shared with Cluster API's core controllers.
	ClusterCache clustercache.ClusterCache
	// Workload reaches a Cluster's installed cluster; nil means through
	// the ClusterCache.
	Workload         func(cluster client.ObjectKey) Workload
	WatchFilterValue string
	// BootstrapAPIGrace is how long a provisioned bootstrap node may take
	// to serve the API before BootstrapReady says BootstrapNotServing; 0
	// means DefaultBootstrapAPIGrace.
	BootstrapAPIGrace time.Duration
}

// DefaultBootstrapAPIGrace is the default BootstrapAPIGrace: a bootstrap
// node's API answers within minutes of its first boot on real hardware.
const DefaultBootstrapAPIGrace = 10 * time.Minute

func (r *Reconciler) bootstrapAPIGrace() time.Duration {
	if r.BootstrapAPIGrace == 0 {
		return DefaultBootstrapAPIGrace
	}
	return r.BootstrapAPIGrace
}

// Poll intervals while waiting on the installed cluster, which we do not watch.
const (
	waitShort = 3 * time.Second
	waitLong  = 10 * time.Second
)

// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=openshiftcontrolplanes;openshiftcontrolplanes/status;openshiftcontrolplanes/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=openshiftconfigs,verbs=create
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metalmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metalmachines,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	if r.Workload == nil {
		if r.ClusterCache == nil {
			return errors.New("the OpenShiftControlPlane reconciler needs the hub's ClusterCache")
		}
		r.Workload = func(cluster client.ObjectKey) Workload {
			return &clusterCacheWorkload{cc: r.ClusterCache, secrets: r.APIReader, cluster: cluster}
		}
	}
	if err := metrics.Add(mgr, []client.Object{&controlplanev1.OpenShiftControlPlane{}}, r.newControlPlaneCollector(mgr.GetCache())); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&controlplanev1.OpenShiftControlPlane{}).
		Owns(&clusterv1.Machine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToControlPlane),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Complete(r)
}

func clusterToControlPlane(_ context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*clusterv1.Cluster)
	if !ok || c.Spec.ControlPlaneRef.Kind != "OpenShiftControlPlane" || c.Spec.ControlPlaneRef.APIGroup != controlplanev1.GroupVersion.Group {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.ControlPlaneRef.Name}}}
}

// errWait means a precondition is missing and a condition says which.
var errWait = errors.New("waiting")

// scope is one reconcile of one control plane.
type scope struct {
	cp       *controlplanev1.OpenShiftControlPlane
	cluster  *clusterv1.Cluster
	machines []*clusterv1.Machine // owned by cp, bootstrap included
	state    *corev1.Secret

	// ic is the install-config (icRaw as written), read once when needed.
	ic    *installconfig.InstallConfig
	icRaw []byte
}

func (s *scope) bootstrapMachine() *clusterv1.Machine {
	for _, m := range s.machines {
		if _, ok := m.Labels[controlplanev1.BootstrapMachineLabel]; ok {
			return m
		}
	}
	return nil
}

func (s *scope) masters() []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for _, m := range s.machines {
		if _, ok := m.Labels[controlplanev1.BootstrapMachineLabel]; !ok {
			out = append(out, m)
		}
	}
	return out
}

// Reconcile moves the control plane one step further.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	cp := &controlplanev1.OpenShiftControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, cp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if changed, err := finalizers.EnsureFinalizer(ctx, r.Client, cp, controlplanev1.OpenShiftControlPlaneFinalizer); changed || err != nil {
		return ctrl.Result{}, err
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, cp.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if cluster == nil {
		if !cp.DeletionTimestamp.IsZero() {
			// The Cluster is gone already: only the Machines are left to delete.
			cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cp.Namespace, Name: cp.Labels[clusterv1.ClusterNameLabel]}}
		} else {
			return ctrl.Result{}, nil // Cluster API sets the owner reference, which wakes us
		}
	}
	run, stop, err := reconciler.Begin(ctx, r.Client, cluster, cp, controlplanev1.BootstrapReadyCondition,
		controlplanev1.ControlPlaneInitializedCondition, controlplanev1.BootstrapRemovedCondition, controlplanev1.AvailableCondition,
		controlplanev1.MachinesCreatedCondition)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{cp: cp, cluster: cluster}
	from := cp.Status.BootstrapPhase
	defer func() {
		r.updateStatus(s)
		installed := r.completesInstall(ctx, cp, from)
		run.End(ctx, &reterr)
		if installed && run.Patched() {
			observeInstalled(cp)
		}
	}()
	if s.machines, err = r.ownedMachines(ctx, cp, cluster.Name); err != nil {
		return ctrl.Result{}, err
	}
	if !cp.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	res, err := r.reconcile(ctx, s)
	if errors.Is(err, errWait) {
		return ctrl.Result{RequeueAfter: waitLong}, nil
	}
	return res, err
}

func (r *Reconciler) ownedMachines(ctx context.Context, cp *controlplanev1.OpenShiftControlPlane, cluster string) ([]*clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cp.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, err
	}
	var out []*clusterv1.Machine
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], cp) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// reconcile runs the phases of a control plane that is not being deleted.
func (r *Reconciler) reconcile(ctx context.Context, s *scope) (ctrl.Result, error) {
	return reconciler.Phases(ctx, s, r.waitForInfrastructure, r.readInstallState, r.reconcileSecrets, r.reconcileMachines)
}

// waitForInfrastructure waits for the Cluster's infrastructure and its
// control-plane endpoint (the API VIP).
func (r *Reconciler) waitForInfrastructure(_ context.Context, s *scope) (ctrl.Result, error) {
	if !ptr.Deref(s.cluster.Status.Initialization.InfrastructureProvisioned, false) || s.cluster.Spec.ControlPlaneEndpoint.Host == "" {
		setCondition(s.cp, controlplanev1.BootstrapReadyCondition, metav1.ConditionFalse, controlplanev1.WaitingForInfrastructureReason,
			"Waiting for Cluster "+s.cluster.Name+"'s infrastructure to be provisioned and to name the control-plane endpoint")
		return ctrl.Result{}, errWait // the Cluster watch wakes us sooner
	}
	return ctrl.Result{}, nil
}

// reconcileMachines brings up the control plane through the bootstrap
// node, then keeps the masters at spec.replicas.
func (r *Reconciler) reconcileMachines(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !ptr.Deref(s.cp.Status.Initialization.ControlPlaneInitialized, false) {
		return r.reconcileBootstrap(ctx, s)
	}
	return r.reconcileInitialized(ctx, s)
}

func (r *Reconciler) readInstallState(ctx context.Context, s *scope) (ctrl.Result, error) {
	name := s.cp.Spec.InstallStateRef.Name
	st := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cp.Namespace, Name: name}, st)
	if err == nil {
		for _, k := range []string{controlplanev1.InstallStateCACertKey, controlplanev1.InstallStateCAKeyKey, controlplanev1.InstallStateKubeconfigKey} {
			if len(st.Data[k]) == 0 {
				err = fmt.Errorf("key %s is missing or empty", k)
				break
			}
		}
	}
	if err != nil {
		setCondition(s.cp, controlplanev1.BootstrapReadyCondition, metav1.ConditionFalse, controlplanev1.InstallStateMissingReason,
			fmt.Sprintf("Install-state Secret %s (spec.installStateRef): %v; `metalshift create manifests` writes it", name, err))
		return ctrl.Result{}, errWait
	}
	s.state = st
	return ctrl.Result{}, nil
}

// reconcileSecrets writes <cluster>-ca and <cluster>-kubeconfig from the
// install state; both are owned by the control plane.
func (r *Reconciler) reconcileSecrets(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, want := range []struct {
		purpose string
		data    map[string][]byte
	}{
		{"ca", map[string][]byte{"tls.crt": s.state.Data[controlplanev1.InstallStateCACertKey], "tls.key": s.state.Data[controlplanev1.InstallStateCAKeyKey]}},
		{"kubeconfig", map[string][]byte{"value": s.state.Data[controlplanev1.InstallStateKubeconfigKey]}},
	} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.cp.Namespace, Name: s.cluster.Name + "-" + want.purpose}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, sec, func() error {
			if sec.Labels == nil {
				sec.Labels = map[string]string{}
			}
			sec.Labels[clusterv1.ClusterNameLabel] = s.cluster.Name
			sec.Type = clusterv1.ClusterSecretType
			sec.Data = want.data
			return controllerutil.SetControllerReference(s.cp, sec, r.Client.Scheme())
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing Secret %s: %w", sec.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

func setCondition(cp *controlplanev1.OpenShiftControlPlane, t string, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(cp, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg})
}

func (r *Reconciler) event(obj runtime.Object, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, reason, format, args...)
	}
}

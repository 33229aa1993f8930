package equinixmetalcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloud"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// APIPort is the port of the cluster's API on its elastic IP.
const APIPort = 6443

// Reconciler reconciles EquinixMetalClusters.
type Reconciler struct {
	Client client.Client
	// APIReader reads the credentials Secret without a cache of every
	// Secret.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Cloud     cloud.Options
	// PollInterval is how often a cluster whose addresses wait (a pending
	// reservation, no active device to hold them) is looked at again
	// (30 s when 0).
	PollInterval     time.Duration
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalclusters;equinixmetalclusters/status;equinixmetalclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.EquinixMetalCluster{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(
			util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("EquinixMetalCluster"), mgr.GetClient(), &infrav1.EquinixMetalCluster{}),
		), builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		// A machine's device coming, going or changing state moves the
		// addresses; its other status writes do not (each reconcile reads
		// the project's devices and addresses from the API).
		Watches(&infrav1.EquinixMetalMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineToCluster),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: deviceChanged})).
		Complete(r)
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 30 * time.Second
}

// deviceChanged tells whether an update of an EquinixMetalMachine changed
// what the cluster's addresses follow: its device, the device's state, or
// the machine's deletion.
func deviceChanged(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*infrav1.EquinixMetalMachine)
	n, ok2 := e.ObjectNew.(*infrav1.EquinixMetalMachine)
	if !ok1 || !ok2 {
		return true
	}
	return o.Status.DeviceID != n.Status.DeviceID || o.Status.InstanceState != n.Status.InstanceState ||
		o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
}

// machineToCluster wakes the EquinixMetalCluster of a machine's Cluster.
func (r *Reconciler) machineToCluster(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil
	}
	c := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, c); err != nil {
		return nil
	}
	if ref := c.Spec.InfrastructureRef; ref.Kind == "EquinixMetalCluster" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}}}
	}
	return nil
}

// Reconcile brings one EquinixMetalCluster to its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	emc := &infrav1.EquinixMetalCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, emc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, emc, infrav1.EquinixMetalClusterFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, emc.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting the owner Cluster: %w", err)
	}
	if cluster != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))
	}
	run, stop, err := reconciler.Begin(ctx, r.Client, cluster, emc, infrav1.EquinixMetalClusterReadyCondition, infrav1.ElasticIPsReadyCondition,
		infrav1.DNSRecordsReadyCondition)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer run.End(ctx, &reterr)

	api, err := cloud.Client(ctx, r.APIReader, emc, r.Cloud)
	if err != nil {
		return r.apiError(emc, err)
	}
	// The tag names the Cluster, which is the object's owner and, until
	// Cluster API sets the owner, its own namespace and name.
	tag := infrav1.EquinixMetalClusterTag(emc.Namespace, emc.Name)
	if cluster != nil {
		tag = infrav1.EquinixMetalClusterTag(cluster.Namespace, cluster.Name)
	}
	if !emc.DeletionTimestamp.IsZero() {
		name := ""
		if cluster != nil {
			name = cluster.Name
		}
		return r.reconcileDelete(ctx, emc, name, api, tag)
	}
	if cluster == nil {
		setReady(emc, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason, "Waiting for the Cluster controller to set an owner reference")
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, emc, cluster, api, tag)
}

func setReady(emc *infrav1.EquinixMetalCluster, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(emc, metav1.Condition{Type: infrav1.EquinixMetalClusterReadyCondition, Status: status, Reason: reason, Message: msg})
}

func setIPs(emc *infrav1.EquinixMetalCluster, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(emc, metav1.Condition{Type: infrav1.ElasticIPsReadyCondition, Status: status, Reason: reason, Message: msg})
}

func (r *Reconciler) apiError(emc *infrav1.EquinixMetalCluster, err error) (ctrl.Result, error) {
	if errors.Is(err, cloud.ErrCredentials) || cloud.Refused(err) {
		setReady(emc, metav1.ConditionFalse, infrav1.CredentialsUnavailableReason, err.Error())
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	if d := metalclient.Backoff(err, r.Clock.Now()); d > 0 {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	return ctrl.Result{}, err
}

func (r *Reconciler) reconcileNormal(ctx context.Context, emc *infrav1.EquinixMetalCluster, cluster *clusterv1.Cluster, api metalclient.API, tag string) (ctrl.Result, error) {
	held, err := api.ListIPReservations(ctx, emc.Spec.ProjectID, metalclient.IPFilter{Tag: tag})
	if err != nil {
		return r.apiError(emc, err)
	}
	var pending []string
	// The reservations as listed, with their assignments: assign reads
	// no reservation again.
	byRole := map[string]*equinixapi.IPReservation{}
	for _, role := range []string{infrav1.EquinixMetalRoleAPI, infrav1.EquinixMetalRoleIngress} {
		res, err := r.reserve(ctx, emc, api, tag, role, held)
		if err != nil {
			if metalclient.IsUnprocessable(err) {
				msg := fmt.Sprintf("The API refused the %s address: %v", role, err)
				setIPs(emc, metav1.ConditionFalse, infrav1.ElasticIPsFailedReason, msg)
				setReady(emc, metav1.ConditionFalse, infrav1.ElasticIPsFailedReason, msg)
				return ctrl.Result{RequeueAfter: r.poll()}, nil
			}
			return r.apiError(emc, err)
		}
		if res.State == "pending" || res.Address == "" {
			pending = append(pending, fmt.Sprintf("%s (reservation %s)", role, res.ID))
			continue
		}
		byRole[role] = res
		ip := &infrav1.EquinixMetalReservedIP{Address: res.Address, ReservationID: res.ID}
		if role == infrav1.EquinixMetalRoleAPI {
			emc.Status.APIIP = ip
		} else {
			emc.Status.IngressIP = ip
		}
	}
	if len(pending) > 0 {
		msg := "Waiting for the approval of the project's IP reservations: " + strings.Join(pending, ", ")
		setIPs(emc, metav1.ConditionFalse, infrav1.ElasticIPsPendingReason, msg)
		setReady(emc, metav1.ConditionFalse, infrav1.ElasticIPsPendingReason, msg)
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	if emc.Spec.ControlPlaneEndpoint.Host == "" {
		emc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: emc.Status.APIIP.Address, Port: APIPort}
	}
	setIPs(emc, metav1.ConditionTrue, infrav1.ElasticIPsReservedReason,
		fmt.Sprintf("API %s, ingress %s", emc.Status.APIIP.Address, emc.Status.IngressIP.Address))
	emc.Status.Initialization.Provisioned = ptr.To(true)
	var requeue time.Duration
	if r.ensureDNS(ctx, emc, cluster.Name) {
		setReady(emc, metav1.ConditionTrue, infrav1.ElasticIPsReservedReason, "The cluster's elastic IPs are reserved")
	} else {
		setReady(emc, metav1.ConditionFalse, infrav1.DNSUpdateFailedReason, "The DNS records are not written: "+conditions.GetMessage(emc, infrav1.DNSRecordsReadyCondition))
		requeue = r.poll()
	}
	wait, err := r.assign(ctx, emc, api, tag, byRole)
	if err != nil {
		return r.apiError(emc, err)
	}
	if wait {
		requeue = r.poll()
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// reserve returns the cluster's reservation of role, requesting it when
// the project has none tagged so (a request whose answer was lost is
// found by its tags the next time).
func (r *Reconciler) reserve(ctx context.Context, emc *infrav1.EquinixMetalCluster, api metalclient.API, tag, role string, held []equinixapi.IPReservation) (*equinixapi.IPReservation, error) {
	roleTag := infrav1.EquinixMetalRoleTagPrefix + role
	for i := range held {
		if slices.Contains(held[i].Tags, roleTag) {
			return &held[i], nil
		}
	}
	res, err := api.RequestIPReservation(ctx, emc.Spec.ProjectID, equinixapi.IPReservationRequest{
		Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: emc.Spec.Metro, Facility: emc.Spec.Facility,
		Tags: []string{tag, roleTag}, Details: fmt.Sprintf("The %s address of cluster %s/%s", role, emc.Namespace, emc.Name),
	})
	if err != nil {
		return nil, err
	}
	r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, "ElasticIPReserved", "Reserve", "Reserved the %s address (reservation %s) %s", role, res.ID, res.Address)
	return res, nil
}

// assign puts the API address on an active control-plane device and the
// ingress address on an active worker (else a control-plane device),
// keeping an assignment while its device is active; it tells whether an
// address waits for a device.
func (r *Reconciler) assign(ctx context.Context, emc *infrav1.EquinixMetalCluster, api metalclient.API, tag string, byRole map[string]*equinixapi.IPReservation) (bool, error) {
	devices, err := api.ListDevices(ctx, emc.Spec.ProjectID, metalclient.DeviceFilter{Tag: tag})
	if err != nil {
		return false, err
	}
	slices.SortFunc(devices, func(a, b equinixapi.Device) int { return a.CreatedAt.Compare(b.CreatedAt) })
	active := map[string]bool{}
	var cp, workers []string
	for _, d := range devices {
		if d.State != equinixapi.StateActive {
			continue
		}
		active[d.ID] = true
		if slices.Contains(d.Tags, infrav1.EquinixMetalRoleTagPrefix+infrav1.EquinixMetalRoleControlPlane) {
			cp = append(cp, d.ID)
		} else {
			workers = append(workers, d.ID)
		}
	}
	waiting := false
	for _, a := range []struct {
		ip         *infrav1.EquinixMetalReservedIP
		role       string
		candidates []string
	}{{emc.Status.APIIP, infrav1.EquinixMetalRoleAPI, cp}, {emc.Status.IngressIP, infrav1.EquinixMetalRoleIngress, append(workers, cp...)}} {
		res := byRole[a.role]
		holder := ""
		for _, as := range res.Assignments {
			dev := deviceOf(as)
			if active[dev] && holder == "" {
				holder = dev
				continue
			}
			// Its device is going or gone, or the address is on two.
			if err := api.Unassign(ctx, as.ID); err != nil && !metalclient.IsNotFound(err) {
				return false, err
			}
		}
		if holder != "" {
			continue
		}
		if len(a.candidates) == 0 {
			waiting = true
			continue
		}
		if _, err := api.AssignIP(ctx, a.candidates[0], a.ip.Address); err != nil {
			return false, err
		}
		r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, "ElasticIPAssigned", "Assign", "The %s address %s is on device %s", a.role, a.ip.Address, a.candidates[0])
	}
	return waiting, nil
}

// deviceOf is the ID of the device an assignment is on.
func deviceOf(as equinixapi.IPAssignment) string {
	if as.AssignedTo == nil {
		return ""
	}
	h := as.AssignedTo.Href
	if as.AssignedTo.ID != "" {
		return as.AssignedTo.ID
	}
	return h[strings.LastIndex(h, "/")+1:]
}

// reconcileDelete removes the DNS records, drops the addresses'
// assignments and releases the cluster's reservations; then the finalizer
// goes.
func (r *Reconciler) reconcileDelete(ctx context.Context, emc *infrav1.EquinixMetalCluster, cluster string, api metalclient.API, tag string) (ctrl.Result, error) {
	if err := r.removeDNS(ctx, emc, cluster); err != nil {
		msg := "Removing the DNS records: " + err.Error()
		setDNS(emc, metav1.ConditionFalse, infrav1.DNSUpdateFailedReason, msg)
		setReady(emc, metav1.ConditionFalse, infrav1.DNSUpdateFailedReason, msg)
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	}
	held, err := api.ListIPReservations(ctx, emc.Spec.ProjectID, metalclient.IPFilter{Tag: tag})
	if err != nil {
		return r.apiError(emc, err)
	}
	for _, res := range held {
		for _, as := range res.Assignments {
			if err := api.Unassign(ctx, as.ID); err != nil && !metalclient.IsNotFound(err) {
				return r.apiError(emc, err)
			}
		}
		if err := api.ReleaseIPReservation(ctx, res.ID); err != nil && !metalclient.IsNotFound(err) {
			return r.apiError(emc, err)
		}
		r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, "ElasticIPReleased", "Release", "Released reservation %s (%s)", res.ID, res.Address)
	}
	controllerutil.RemoveFinalizer(emc, infrav1.EquinixMetalClusterFinalizer)
	return ctrl.Result{}, nil
}

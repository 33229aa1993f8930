package equinixmetalmachine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"

	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloud"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// MaxFailedDevices is how many devices of one machine may fail to
// provision before the machine stops replacing them.
const MaxFailedDevices = 3

// Reconciler reconciles EquinixMetalMachines.
type Reconciler struct {
	Client client.Client
	// APIReader reads the credentials and bootstrap data Secrets without
	// a cache of every Secret.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Cloud     cloud.Options
	// BootScriptURL is the iPXE script a machine's device boots when its
	// spec names none: the hub's, signed for the machine. nil: the hub
	// serves none, and a machine must name one.
	BootScriptURL func(ctx context.Context, emm *infrav1.EquinixMetalMachine, emc *infrav1.EquinixMetalCluster) (string, error)
	// PollInterval is how often a device on its way (queued, provisioning,
	// deprovisioning) is looked at again (10 s when 0).
	PollInterval     time.Duration
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalmachines;equinixmetalmachines/status;equinixmetalmachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	clusterToMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.EquinixMetalMachineList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Its own status writes do not wake it (each reconcile reads the
		// device from the API; the poll looks again).
		For(&infrav1.EquinixMetalMachine{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: notStatusOnly})).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		// The Machine wakes it when what the device follows changes: its
		// bootstrap data, its Node, its labels, its deletion.
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("EquinixMetalMachine"))),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: machineChanged})).
		// A Cluster paused, resumed or provisioned wakes its machines.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log))).
		Complete(r)
}

// notStatusOnly tells whether an update of an EquinixMetalMachine changed
// more than its status: its spec or its metadata (owner, finalizers,
// labels, annotations, deletion).
func notStatusOnly(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*infrav1.EquinixMetalMachine)
	n, ok2 := e.ObjectNew.(*infrav1.EquinixMetalMachine)
	if !ok1 || !ok2 {
		return true
	}
	o, n = o.DeepCopy(), n.DeepCopy()
	for _, x := range []*infrav1.EquinixMetalMachine{o, n} {
		x.Status, x.ResourceVersion, x.ManagedFields = infrav1.EquinixMetalMachineStatus{}, "", nil
	}
	return !equality.Semantic.DeepEqual(o, n)
}

// machineChanged tells whether an update of a Machine changed what its
// EquinixMetalMachine acts on.
func machineChanged(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*clusterv1.Machine)
	n, ok2 := e.ObjectNew.(*clusterv1.Machine)
	if !ok1 || !ok2 {
		return true
	}
	return !ptr.Equal(o.Spec.Bootstrap.DataSecretName, n.Spec.Bootstrap.DataSecretName) || o.Status.NodeRef != n.Status.NodeRef ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 10 * time.Second
}

// scope is one reconcile's objects.
type scope struct {
	emm     *infrav1.EquinixMetalMachine
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	emc     *infrav1.EquinixMetalCluster
	api     metalclient.API
}

// Reconcile brings one EquinixMetalMachine to its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	emm := &infrav1.EquinixMetalMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, emm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, emm, infrav1.EquinixMetalMachineFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, emm.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx)
	meta := emm.ObjectMeta
	if machine != nil {
		log = log.WithValues("Machine", klog.KObj(machine))
		ctx = ctrl.LoggerInto(ctx, log)
		meta = machine.ObjectMeta
	}
	var cluster *clusterv1.Cluster
	if meta.Labels[clusterv1.ClusterNameLabel] != "" {
		if cluster, err = util.GetClusterFromMetadata(ctx, r.Client, meta); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	run, stop, err := reconciler.Begin(ctx, r.Client, cluster, emm, infrav1.EquinixMetalMachineReadyCondition, infrav1.DeviceReadyCondition)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer run.End(ctx, &reterr)

	s := &scope{emm: emm, machine: machine, cluster: cluster}
	if !emm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if machine == nil || cluster == nil {
		setReady(emm, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason, "Waiting for the Machine controller to set an owner reference")
		return ctrl.Result{}, nil
	}
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setReady(emm, metav1.ConditionFalse, infrav1.WaitingForClusterInfrastructureReason, "Waiting for the cluster's EquinixMetalCluster to be provisioned")
		return ctrl.Result{}, nil
	}
	if machine.Spec.Bootstrap.DataSecretName == nil {
		setReady(emm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "Waiting for the Machine's bootstrap data")
		return ctrl.Result{}, nil
	}
	if err := r.connect(ctx, s); err != nil {
		return r.apiError(emm, err)
	}
	return r.reconcileNormal(ctx, s)
}

// connect reads the cluster's EquinixMetalCluster and makes its client.
func (r *Reconciler) connect(ctx context.Context, s *scope) error {
	ref := s.cluster.Spec.InfrastructureRef
	if ref.Kind != "EquinixMetalCluster" {
		return fmt.Errorf("%w: the Cluster's infrastructure is a %s, not an EquinixMetalCluster", errSpec, ref.Kind)
	}
	s.emc = &infrav1.EquinixMetalCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: ref.Name}, s.emc); err != nil {
		return fmt.Errorf("reading EquinixMetalCluster %s: %w", ref.Name, err)
	}
	api, err := cloud.Client(ctx, r.APIReader, s.emc, r.Cloud)
	s.api = api
	return err
}

// errSpec marks an error the machine's spec (or its cluster's) causes.
var errSpec = errors.New("invalid spec")

// apiError reports an error of the API or the credentials on the
// conditions and says when to try again.
func (r *Reconciler) apiError(emm *infrav1.EquinixMetalMachine, err error) (ctrl.Result, error) {
	switch {
	case errors.Is(err, cloud.ErrCredentials), cloud.Refused(err):
		setReady(emm, metav1.ConditionFalse, infrav1.CredentialsUnavailableReason, err.Error())
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case errors.Is(err, errSpec):
		setReady(emm, metav1.ConditionFalse, infrav1.DeviceCreateFailedReason, err.Error())
		return ctrl.Result{}, nil
	}
	if d := metalclient.Backoff(err, r.Clock.Now()); d > 0 {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	return ctrl.Result{}, err
}

func setReady(emm *infrav1.EquinixMetalMachine, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(emm, metav1.Condition{Type: infrav1.EquinixMetalMachineReadyCondition, Status: status, Reason: reason, Message: msg})
}

// both sets the Ready and DeviceReady conditions alike. DeviceReady's
// lastTransitionTime is the reconciler's clock, against which watchBoot
// measures how long the device has been active.
func (r *Reconciler) both(emm *infrav1.EquinixMetalMachine, status metav1.ConditionStatus, reason, msg string) {
	setReady(emm, status, reason, msg)
	conditions.Set(emm, metav1.Condition{Type: infrav1.DeviceReadyCondition, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(r.Clock.Now())})
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	emm := s.emm
	d, err := r.device(ctx, s)
	if err != nil {
		return r.apiError(emm, err)
	}
	if d == nil {
		if emm.Status.FailedDevices >= MaxFailedDevices {
			r.both(emm, metav1.ConditionFalse, infrav1.DeviceFailedReason, fmt.Sprintf(
				"%d devices failed to provision; the machine does not try again: delete it for a new one", emm.Status.FailedDevices))
			return ctrl.Result{}, nil
		}
		if d, err = r.create(ctx, s); err != nil || d == nil {
			if err != nil {
				return r.apiError(emm, err)
			}
			return ctrl.Result{RequeueAfter: time.Minute}, nil // create said why
		}
	}
	emm.Status.DeviceID = d.ID
	emm.Status.InstanceState = d.State
	switch d.State {
	case equinixapi.StateActive:
		// The providerID comes with provisioning: Cluster API takes a
		// providerID as provisioned.
		if emm.Spec.ProviderID == "" {
			emm.Spec.ProviderID = infrav1.EquinixMetalProviderIDPrefix + d.ID
		}
		emm.Status.Initialization.Provisioned = ptr.To(true)
		emm.Status.Addresses = addresses(d)
		r.both(emm, metav1.ConditionTrue, infrav1.DeviceActiveReason, "Device "+d.ID+" is active")
		return r.watchBoot(ctx, s, d)
	case equinixapi.StateFailed:
		return r.replaceFailed(ctx, s, d)
	case equinixapi.StateInactive, equinixapi.StatePoweringOff:
		r.both(emm, metav1.ConditionFalse, infrav1.DeviceInactiveReason, "Device "+d.ID+" is powered off")
		return ctrl.Result{RequeueAfter: r.poll()}, nil
	case equinixapi.StateQueued:
		r.both(emm, metav1.ConditionFalse, infrav1.DeviceQueuedReason, "Device "+d.ID+" is queued for hardware")
	default:
		r.both(emm, metav1.ConditionFalse, infrav1.DeviceProvisioningReason, fmt.Sprintf("Device %s is %s", d.ID, d.State))
	}
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// watchBoot reinstalls an active device whose Node has not registered
// within the cluster's deviceBootTimeout: its boot loader could not load
// the iPXE script (the hub was down, say) and sits there, as a real one
// does. The bootstrap machine registers no Node and is not watched. It
// says when to look again.
func (r *Reconciler) watchBoot(ctx context.Context, s *scope, d *equinixapi.Device) (ctrl.Result, error) {
	emm, machine := s.emm, s.machine
	if machine.Status.NodeRef.IsDefined() {
		return ctrl.Result{}, nil
	}
	if _, ok := machine.Labels[controlplanev1.BootstrapMachineLabel]; ok {
		return ctrl.Result{}, nil
	}
	timeout := infrav1.EquinixMetalDefaultDeviceBootTimeout
	if t := s.emc.Spec.DeviceBootTimeout; t != nil && t.Duration > 0 {
		timeout = t.Duration
	}
	active := conditions.Get(emm, infrav1.DeviceReadyCondition).LastTransitionTime.Time
	wait := active.Add(timeout).Sub(r.Clock.Now())
	if wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	in := equinixapi.DeviceActionInput{Type: equinixapi.ActionReinstall}
	if emm.Spec.IPXEScriptURL == "" && r.BootScriptURL != nil {
		// A fresh signature: the first one may be near its expiry.
		script, err := r.BootScriptURL(ctx, emm, s.emc)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("the device's iPXE script: %w", err)
		}
		in.IPXEScriptURL = script
	}
	if err := s.api.DeviceAction(ctx, d.ID, in); err != nil {
		return r.apiError(emm, err)
	}
	msg := fmt.Sprintf("Device %s was active for %s without the Machine's Node registering; it is reinstalled", d.ID, timeout)
	r.Recorder.Eventf(emm, nil, corev1.EventTypeWarning, infrav1.DeviceReinstallingReason, "Reinstall", msg)
	ctrl.LoggerFrom(ctx).Info("Reinstalling device", "device", d.ID, "timeout", timeout)
	emm.Status.InstanceState = equinixapi.StateReinstalling
	r.both(emm, metav1.ConditionFalse, infrav1.DeviceReinstallingReason, msg)
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

// device is the machine's device: the one status.deviceID names, else
// the one tagged with the machine's UID (every page read). A device being
// deprovisioned is no longer the machine's.
func (r *Reconciler) device(ctx context.Context, s *scope) (*equinixapi.Device, error) {
	emm := s.emm
	if id := emm.Status.DeviceID; id != "" {
		d, err := s.api.GetDevice(ctx, id)
		switch {
		case err == nil:
			if live(d) {
				return d, nil
			}
		case metalclient.IsNotFound(err):
		case metalclient.IsForbidden(err):
			// Some answer 403 for a failed device: the tag lookup below
			// tells its state.
		default:
			return nil, err
		}
	}
	ds, err := s.api.ListDevices(ctx, s.emc.Spec.ProjectID, metalclient.DeviceFilter{Tag: machineTag(emm)})
	if err != nil {
		return nil, err
	}
	for i := range ds {
		if live(&ds[i]) {
			return &ds[i], nil
		}
	}
	if emm.Status.DeviceID != "" {
		r.Recorder.Eventf(emm, nil, corev1.EventTypeWarning, infrav1.DeviceNotFoundReason, "Lookup", "Device %s is gone", emm.Status.DeviceID)
		emm.Status.DeviceID, emm.Status.InstanceState = "", ""
	}
	return nil, nil
}

func live(d *equinixapi.Device) bool {
	return d.State != equinixapi.StateDeprovisioning && d.State != equinixapi.StateDeleted
}

func machineTag(emm *infrav1.EquinixMetalMachine) string {
	return infrav1.EquinixMetalMachineTagPrefix + string(emm.UID)
}

// role is the machine's role, as tagged.
func role(m *clusterv1.Machine) string {
	if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		return infrav1.EquinixMetalRoleControlPlane
	}
	return infrav1.EquinixMetalRoleWorker
}

// create creates the machine's device; nil without error when the API
// refused it for a reason the conditions now say.
func (r *Reconciler) create(ctx context.Context, s *scope) (*equinixapi.Device, error) {
	emm, emc := s.emm, s.emc
	userdata, err := r.userdata(ctx, s)
	if err != nil {
		return nil, err
	}
	script := emm.Spec.IPXEScriptURL
	os := emm.Spec.OperatingSystem
	if os == "" {
		os = infrav1.CustomIPXE
	}
	if os == infrav1.CustomIPXE && script == "" {
		if r.BootScriptURL == nil {
			return nil, fmt.Errorf("%w: spec.ipxeScriptURL is empty and this hub serves no iPXE script for devices", errSpec)
		}
		if script, err = r.BootScriptURL(ctx, emm, emc); err != nil {
			return nil, fmt.Errorf("the device's iPXE script: %w", err)
		}
	}
	in := equinixapi.DeviceCreateInput{
		Plan: emm.Spec.Plan, OperatingSystem: os, Hostname: emm.Name, BillingCycle: emm.Spec.BillingCycle,
		Userdata: userdata, IPXEScriptURL: script,
		Tags: append([]string{infrav1.EquinixMetalClusterTag(s.cluster.Namespace, s.cluster.Name), machineTag(emm), infrav1.EquinixMetalRoleTagPrefix + role(s.machine)}, emm.Spec.Tags...),
	}
	if os != infrav1.CustomIPXE {
		in.IPXEScriptURL = ""
	}
	switch {
	case emm.Spec.Metro != "":
		in.Metro = emm.Spec.Metro
	case emm.Spec.Facility != "":
		in.Facility = equinixapi.StringOrList{emm.Spec.Facility}
	case emc.Spec.Metro != "":
		in.Metro = emc.Spec.Metro
	default:
		in.Facility = equinixapi.StringOrList{emc.Spec.Facility}
	}
	reservations := reservationIDs(emm.Spec.HardwareReservationID)
	if len(reservations) == 0 {
		reservations = []string{""}
	}
	var last error
	for _, id := range reservations {
		in.HardwareReservationID = id
		d, err := s.api.CreateDevice(ctx, emc.Spec.ProjectID, in)
		if err == nil {
			r.Recorder.Eventf(emm, nil, corev1.EventTypeNormal, "DeviceCreated", "Create", "Created device %s (plan %s)", d.ID, d.Plan.Slug)
			ctrl.LoggerFrom(ctx).Info("Created device", "device", d.ID)
			return d, nil
		}
		if !metalclient.IsUnprocessable(err) {
			return nil, err
		}
		last = err
	}
	reason := infrav1.DeviceCreateFailedReason
	if emm.Spec.HardwareReservationID != "" {
		reason = infrav1.NoHardwareReservationAvailableReason
	}
	r.both(emm, metav1.ConditionFalse, reason, "The API refused the device: "+last.Error())
	return nil, nil
}

// reservationIDs are the hardware reservations to try, in order: one ID,
// a comma-separated list, or next-available.
func reservationIDs(spec string) []string {
	var out []string
	for _, id := range strings.Split(spec, ",") {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// userdata is the Machine's bootstrap data: an Ignition config, or the
// small one that merges it from the ignition server. The API key is never
// in it.
func (r *Reconciler) userdata(ctx context.Context, s *scope) (string, error) {
	name := *s.machine.Spec.Bootstrap.DataSecretName
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.machine.Namespace, Name: name}, sec); err != nil {
		return "", fmt.Errorf("reading bootstrap data Secret %s: %w", name, err)
	}
	v := sec.Data["value"]
	if len(v) == 0 {
		return "", fmt.Errorf("bootstrap data Secret %s has no value", name)
	}
	return string(v), nil
}

// replaceFailed deletes a device that failed to provision; the next
// reconcile creates another, up to MaxFailedDevices.
func (r *Reconciler) replaceFailed(ctx context.Context, s *scope, d *equinixapi.Device) (ctrl.Result, error) {
	emm := s.emm
	if err := s.api.DeleteDevice(ctx, d.ID, true); err != nil && !metalclient.IsNotFound(err) {
		return r.apiError(emm, err)
	}
	emm.Status.FailedDevices++
	emm.Status.DeviceID, emm.Status.InstanceState = "", ""
	msg := fmt.Sprintf("Device %s failed to provision (%d of %d); it is deleted and replaced", d.ID, emm.Status.FailedDevices, MaxFailedDevices)
	r.Recorder.Eventf(emm, nil, corev1.EventTypeWarning, infrav1.DeviceFailedReason, "Replace", msg)
	r.both(emm, metav1.ConditionFalse, infrav1.DeviceFailedReason, msg)
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// addresses are the device's own (management) addresses: public ones as
// ExternalIP, private ones as InternalIP, and its hostname. The cluster's
// elastic IPs assigned to it are not the machine's: they move to another
// device when this one goes.
func addresses(d *equinixapi.Device) []clusterv1.MachineAddress {
	var out []clusterv1.MachineAddress
	for _, a := range d.IPAddresses {
		if !a.Management {
			continue
		}
		t := clusterv1.MachineInternalIP
		if a.Public {
			t = clusterv1.MachineExternalIP
		}
		out = append(out, clusterv1.MachineAddress{Type: t, Address: a.Address})
	}
	return append(out, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: d.Hostname})
}

// reconcileDelete deletes the machine's device and waits until the API no
// longer has it; then the finalizer goes.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	emm := s.emm
	if s.cluster == nil {
		// Without its Cluster the machine's project is unknown: a device
		// it had is left, and said so.
		if emm.Status.DeviceID != "" {
			r.Recorder.Eventf(emm, nil, corev1.EventTypeWarning, "DeviceLeft", "Delete",
				"The machine's Cluster is gone: device %s is not deleted by metalshift", emm.Status.DeviceID)
		}
		controllerutil.RemoveFinalizer(emm, infrav1.EquinixMetalMachineFinalizer)
		return ctrl.Result{}, nil
	}
	if err := r.connect(ctx, s); err != nil {
		if apierrors.IsNotFound(errors.Unwrap(err)) {
			controllerutil.RemoveFinalizer(emm, infrav1.EquinixMetalMachineFinalizer)
			return ctrl.Result{}, nil
		}
		return r.apiError(emm, err)
	}
	ds, err := s.api.ListDevices(ctx, s.emc.Spec.ProjectID, metalclient.DeviceFilter{Tag: machineTag(emm)})
	if err != nil {
		return r.apiError(emm, err)
	}
	if len(ds) == 0 {
		controllerutil.RemoveFinalizer(emm, infrav1.EquinixMetalMachineFinalizer)
		return ctrl.Result{}, nil
	}
	for _, d := range ds {
		if d.State == equinixapi.StateDeprovisioning {
			continue
		}
		if err := s.api.DeleteDevice(ctx, d.ID, true); err != nil && !metalclient.IsNotFound(err) {
			return r.apiError(emm, err)
		}
		r.Recorder.Eventf(emm, nil, corev1.EventTypeNormal, "DeviceDeleted", "Delete", "Deleting device %s", d.ID)
	}
	r.both(emm, metav1.ConditionFalse, infrav1.DeviceDeletingReason, fmt.Sprintf("Waiting for device %s to be deprovisioned", ds[0].ID))
	return ctrl.Result{RequeueAfter: r.poll()}, nil
}

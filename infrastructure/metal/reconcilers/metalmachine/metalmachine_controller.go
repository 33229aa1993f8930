package metalmachine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// Reconciler reconciles MetalMachines.
type Reconciler struct {
	Client client.Client
	// APIReader lists hosts and reads Secrets without the cache, so a claim
	// is decided on current data.
	APIReader        client.Reader
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metalmachines;metalmachines/status;metalmachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	clusterToMetalMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.MetalMachineList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MetalMachine{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(
			util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("MetalMachine")))).
		Watches(&metal3v1.BareMetalHost{}, handler.EnqueueRequestsFromMapFunc(r.hostToMetalMachines)).
		// A Cluster paused or resumed: every MetalMachine's Paused condition changes.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToMetalMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		Complete(r)
}

// hostToMetalMachines wakes the MetalMachine that consumes a host, or,
// for a host without consumer, the MetalMachines still waiting for one.
func (r *Reconciler) hostToMetalMachines(ctx context.Context, o client.Object) []reconcile.Request {
	h, ok := o.(*metal3v1.BareMetalHost)
	if !ok {
		return nil
	}
	if c := h.Spec.ConsumerRef; c != nil {
		if c.Kind != "MetalMachine" || c.Namespace != h.Namespace {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Name}}}
	}
	mms := &infrav1.MetalMachineList{}
	if err := r.Client.List(ctx, mms, client.InNamespace(h.Namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, mm := range mms.Items {
		if mm.Status.Host == nil && mm.DeletionTimestamp.IsZero() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&mm)})
		}
	}
	return reqs
}

// Reconcile brings one MetalMachine to its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	mm := &infrav1.MetalMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, mm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, mm, infrav1.MetalMachineFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, mm.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx)
	// Its Cluster: the Machine's, or, before the Machine controller adopts
	// it (which a paused Cluster holds back), its own cluster-name label's.
	meta := mm.ObjectMeta
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
	run, stop, err := reconciler.Begin(ctx, r.Client, cluster, mm, infrav1.MetalMachineReadyCondition, infrav1.HostClaimedCondition)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer run.End(ctx, &reterr)
	if !mm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, mm)
	}
	if machine == nil {
		log.V(4).Info("Waiting for the Machine controller to set an owner reference")
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, mm, machine)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, mm *infrav1.MetalMachine, machine *clusterv1.Machine) (ctrl.Result, error) {
	if machine.Spec.Bootstrap.DataSecretName == nil {
		setReady(mm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason, "Waiting for the Machine's bootstrap data")
		return ctrl.Result{}, nil
	}
	host, err := r.claimedHost(ctx, mm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if host == nil {
		if host, err = r.claim(ctx, mm); err != nil {
			return ctrl.Result{}, err
		}
		if host == nil {
			conditions.Set(mm, metav1.Condition{Type: infrav1.HostClaimedCondition, Status: metav1.ConditionFalse, Reason: infrav1.NoHostAvailableReason,
				Message: fmt.Sprintf("No available BareMetalHost in namespace %s matches hostSelector; add hosts or relax the selector", mm.Namespace)})
			setReady(mm, metav1.ConditionFalse, infrav1.NoHostAvailableReason, "Waiting for an available BareMetalHost")
			return ctrl.Result{}, nil // a host becoming available wakes us (hostToMetalMachines)
		}
	}
	conditions.Set(mm, metav1.Condition{Type: infrav1.HostClaimedCondition, Status: metav1.ConditionTrue, Reason: infrav1.HostClaimedReason,
		Message: "Claimed BareMetalHost " + host.Name})
	if err := r.ensureHostSpec(ctx, mm, machine, host); err != nil {
		return ctrl.Result{}, err
	}
	setStatusFromHost(mm, host)
	return ctrl.Result{}, nil
}

// ProviderID is the Cluster API providerID of a machine on a host:
// metal3://<namespace>/<host>/<metalmachine>, metal3's format. It names the
// machine, not only the host: a host reused by the next machine (the
// bootstrap node's becomes a worker) must not give its Node the providerID
// of a Machine still being deleted, or Cluster API cannot tell which
// Machine the Node is.
func ProviderID(host *metal3v1.BareMetalHost, mm *infrav1.MetalMachine) string {
	return fmt.Sprintf("metal3://%s/%s/%s", host.Namespace, host.Name, mm.Name)
}

// claimedHost is the host status.host names, when it is still the
// machine's; a host is only ever claimed in the machine's own namespace, so
// status.host naming another (written by hand) is dropped unread.
func (r *Reconciler) claimedHost(ctx context.Context, mm *infrav1.MetalMachine) (*metal3v1.BareMetalHost, error) {
	if mm.Status.Host == nil {
		return nil, nil
	}
	if mm.Status.Host.Namespace != mm.Namespace {
		mm.Status.Host = nil
		return nil, nil
	}
	host := &metal3v1.BareMetalHost{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Host.Name}, host)
	if apierrors.IsNotFound(err) || (err == nil && !consumedBy(host, mm)) {
		mm.Status.Host = nil
		return nil, nil
	}
	return host, err
}

func consumedBy(h *metal3v1.BareMetalHost, mm *infrav1.MetalMachine) bool {
	c := h.Spec.ConsumerRef
	return c != nil && h.Namespace == mm.Namespace && c.Kind == "MetalMachine" && c.Namespace == mm.Namespace && c.Name == mm.Name && c.UID == mm.UID
}

// claim picks an available host of its manager's shard matching the
// selector and sets its consumerRef with an Update guarded by its
// resourceVersion: of two machines racing for one host, one gets a conflict
// and tries again.
func (r *Reconciler) claim(ctx context.Context, mm *infrav1.MetalMachine) (*metal3v1.BareMetalHost, error) {
	sel, err := metav1.LabelSelectorAsSelector(&mm.Spec.HostSelector)
	if err != nil {
		return nil, reconcile.TerminalError(fmt.Errorf("invalid hostSelector: %w", err))
	}
	hosts := &metal3v1.BareMetalHostList{}
	if err := r.APIReader.List(ctx, hosts, client.InNamespace(mm.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var candidates []*metal3v1.BareMetalHost
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if consumedBy(h, mm) {
			recordClaim(mm, h)
			return h, nil
		}
		if available(h) && shard.Owns(r.WatchFilterValue, h) {
			candidates = append(candidates, h)
		}
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].Name < candidates[j].Name })
	for _, h := range candidates {
		h.Spec.ConsumerRef = &corev1.ObjectReference{
			APIVersion: infrav1.GroupVersion.String(), Kind: "MetalMachine", Namespace: mm.Namespace, Name: mm.Name, UID: mm.UID,
		}
		err := r.Client.Update(ctx, h)
		if apierrors.IsConflict(err) {
			continue // another machine got it first
		}
		if err != nil {
			return nil, err
		}
		ctrl.LoggerFrom(ctx).Info("Claimed host", "BareMetalHost", klog.KObj(h))
		recordClaim(mm, h)
		return h, nil
	}
	return nil, nil
}

// available: free and ready to provision (the list is already filtered by
// the hostSelector).
func available(h *metal3v1.BareMetalHost) bool {
	return h.Spec.ConsumerRef == nil && h.DeletionTimestamp.IsZero() &&
		h.Status.Provisioning.State == metal3v1.StateAvailable &&
		h.Status.OperationalStatus == metal3v1.OperationalStatusOK
}

func recordClaim(mm *infrav1.MetalMachine, h *metal3v1.BareMetalHost) {
	mm.Status.Host = &infrav1.HostReference{Namespace: h.Namespace, Name: h.Name}
	if mm.Annotations == nil {
		mm.Annotations = map[string]string{}
	}
	mm.Annotations[infrav1.HostAnnotation] = h.Namespace + "/" + h.Name
}

func userDataSecretName(mm *infrav1.MetalMachine) string { return mm.Name + "-user-data" }

// ensureHostSpec gives the host the image, the bootstrap data and power.
// Bootstrap data is rendered once (the contract), so once the host has it
// nothing is read again.
func (r *Reconciler) ensureHostSpec(ctx context.Context, mm *infrav1.MetalMachine, machine *clusterv1.Machine, host *metal3v1.BareMetalHost) error {
	udName := userDataSecretName(mm)
	want := &metal3v1.Image{URL: mm.Spec.Image.URL, Checksum: mm.Spec.Image.Checksum, ChecksumType: metal3v1.ChecksumType(mm.Spec.Image.ChecksumType)}
	if mm.Spec.Image.Format != "" {
		want.DiskFormat = ptr.To(mm.Spec.Image.Format)
	}
	if host.Spec.Online && equality.Semantic.DeepEqual(host.Spec.Image, want) && host.Spec.UserData != nil && host.Spec.UserData.Name == udName &&
		host.Spec.MetaData != nil && host.Spec.MetaData.Name == udName {
		return nil
	}
	boot := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, boot); err != nil {
		return fmt.Errorf("reading bootstrap data Secret %s: %w", *machine.Spec.Bootstrap.DataSecretName, err)
	}
	ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: udName, Namespace: host.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, ud, func() error {
		ud.Type = corev1.SecretTypeOpaque
		ud.Data = map[string][]byte{"userData": boot.Data["value"], "metaData": metaData(host, mm)}
		return controllerutil.SetOwnerReference(mm, ud, r.Client.Scheme())
	}); err != nil {
		return fmt.Errorf("writing the host's user data Secret: %w", err)
	}
	host.Spec.Image = want
	host.Spec.UserData = &corev1.SecretReference{Name: ud.Name, Namespace: ud.Namespace}
	host.Spec.MetaData = &corev1.SecretReference{Name: ud.Name, Namespace: ud.Namespace}
	host.Spec.Online = true
	return r.Client.Update(ctx, host)
}

// metaData is the host's config-drive metadata: its identity, and the
// providerID the installed OS registers its Node with (as cloud-init's
// and afterburn's metadata do on other platforms).
func metaData(host *metal3v1.BareMetalHost, mm *infrav1.MetalMachine) []byte {
	data, _ := json.Marshal(map[string]string{
		"uuid": string(host.UID), "name": host.Name, "local-hostname": host.Name, "providerid": ProviderID(host, mm),
	})
	return data
}

// reconcileDelete releases the host: it drops image, user data and
// consumerRef, so the host deprovisions and becomes available again.
func (r *Reconciler) reconcileDelete(ctx context.Context, mm *infrav1.MetalMachine) error {
	if mm.Status.Host != nil {
		host := &metal3v1.BareMetalHost{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Host.Name}, host)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case consumedBy(host, mm):
			host.Spec.ConsumerRef, host.Spec.Image, host.Spec.UserData, host.Spec.MetaData = nil, nil, nil, nil
			host.Spec.Online = false
			if err := r.Client.Update(ctx, host); err != nil {
				return fmt.Errorf("releasing BareMetalHost %s: %w", host.Name, err)
			}
			ctrl.LoggerFrom(ctx).Info("Released host", "BareMetalHost", klog.KObj(host))
		}
	}
	// The user data Secret goes with the MetalMachine, its owner, through
	// the garbage collector: the provider may not delete Secrets.
	controllerutil.RemoveFinalizer(mm, infrav1.MetalMachineFinalizer)
	return nil
}

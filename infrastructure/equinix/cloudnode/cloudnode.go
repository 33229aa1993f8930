package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// ProviderIDPrefix starts the providerID of a Node on an Equinix Metal
// device: equinixmetal://<device ID>.
const ProviderIDPrefix = "equinixmetal://"

// The taints of the cloud-controller contract (Kubernetes' cloud-provider
// API names them).
const (
	// UninitializedTaint is set by a kubelet started with
	// --cloud-provider=external, until a cloud controller has written the
	// Node's providerID and addresses.
	UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"
	// ShutdownTaint (NoSchedule) marks a Node whose machine is powered off.
	ShutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"
)

// The well-known labels set from the device, at its Node's initialization.
const (
	InstanceTypeLabel = "node.kubernetes.io/instance-type"
	RegionLabel       = "topology.kubernetes.io/region"
	ZoneLabel         = "topology.kubernetes.io/zone"
)

// providedNodeIPAnnotation is what a kubelet with --cloud-provider=external
// and --node-ip records of the address it was told to use: the cloud
// controller puts that address first, and writes none while the device has
// no such address.
const providedNodeIPAnnotation = "alpha.kubernetes.io/provided-node-ip"

// Defaults of Options.
const (
	DefaultResyncInterval = time.Minute
	DefaultRetryInterval  = 5 * time.Second
)

// Name is the controller's, and the manager's leader-election ID's root.
const Name = "equinix-cloud-node"

// Options configure the controller.
type Options struct {
	// Config reaches the installed cluster's API (Run only; nil: the
	// in-cluster configuration or $KUBECONFIG).
	Config *rest.Config
	// API is the Equinix Metal client, with the project's key.
	API metalclient.API
	// ProjectID is the project of the cluster's devices.
	ProjectID string
	// ClusterTag, when set, narrows the devices a Node without providerID
	// is matched to by hostname to those with this tag (the provider's
	// metalshift.io/cluster=<namespace>/<name>): another cluster in the
	// same project may have a device of the same hostname.
	ClusterTag string
	// ResyncInterval is how often each Node is looked at again
	// (DefaultResyncInterval when 0): devices are powered off, deleted and
	// given addresses outside Kubernetes.
	ResyncInterval time.Duration
	// RetryInterval is the pause after a server error of the API
	// (DefaultRetryInterval when 0); a 429 waits for the end of the
	// rate-limit window it names.
	RetryInterval time.Duration
	// LeaderElectionNamespace, when set, makes Run elect a leader through
	// a Lease there, for a Deployment of more than one replica.
	LeaderElectionNamespace string
}

func (o Options) validate() error {
	var errs []error
	if o.API == nil {
		errs = append(errs, errors.New("no Equinix Metal API client"))
	}
	if o.ProjectID == "" {
		errs = append(errs, errors.New("no project ID"))
	}
	return errors.Join(errs...)
}

// Run runs the controller against the installed cluster's API until ctx
// ends, in a manager of its own that serves no metrics or probes.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	cfg := o.Config
	if cfg == nil {
		var err error
		if cfg, err = ctrl.GetConfig(); err != nil {
			return err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          o.LeaderElectionNamespace != "",
		LeaderElectionID:        "metalshift-" + Name,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// client-go's work queue, as every metalshift manager's
		// (component.ControllerConfig says why); and the controller's
		// name may be registered again: Run may be called again in the
		// same process (after a lost lease, or by tests).
		Controller: config.Controller{UsePriorityQueue: ptr.To(false), SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := Setup(mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Setup adds the controller to mgr, a manager of the installed cluster.
func Setup(mgr ctrl.Manager, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	r := &nodeReconciler{c: mgr.GetClient(), o: o, events: mgr.GetEventRecorder(Name)}
	return ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&corev1.Node{}, builder.WithPredicates(changes)).
		Complete(r)
}

// changes lets through a new Node, and an update of what the controller
// reads of a Node (its providerID, taints, labels, addresses, whether it is
// Ready); a kubelet's other status writes would each cost API calls, and the
// resync looks at every Node anyway.
var changes = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*corev1.Node)
		b, okB := e.ObjectNew.(*corev1.Node)
		if !okA || !okB {
			return true
		}
		return a.Spec.ProviderID != b.Spec.ProviderID || !slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, sameTaint) ||
			!slices.Equal(a.Status.Addresses, b.Status.Addresses) || ready(a) != ready(b) ||
			!mapsEqual(a.Labels, b.Labels) || a.Annotations[providedNodeIPAnnotation] != b.Annotations[providedNodeIPAnnotation]
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return true },
}

func sameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// DeviceID is the device ID of an Equinix Metal providerID, and whether
// providerID is one.
func DeviceID(providerID string) (string, bool) {
	id, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	return id, ok && id != ""
}

type nodeReconciler struct {
	c      client.Client
	o      Options
	events events.EventRecorder
}

func (r *nodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	node := &corev1.Node{}
	if err := r.c.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	resync := ctrl.Result{RequeueAfter: r.o.ResyncInterval}
	id, ours := DeviceID(node.Spec.ProviderID)
	if node.Spec.ProviderID != "" && !ours {
		return ctrl.Result{}, nil // another cloud's Node
	}

	var d *equinixapi.Device
	var err error
	if id == "" {
		d, err = r.byHostname(ctx, node.Name)
		if err != nil {
			return r.apiError(ctx, err)
		}
		if d == nil {
			// Not ours to judge: a Node no device matches may belong to
			// another cluster of the project, or register before its
			// device is listed.
			log.V(1).Info("no device of the project has the Node's hostname", "hostname", node.Name)
			return resync, nil
		}
	} else {
		d, err = r.o.API.GetDevice(ctx, id)
		switch {
		case metalclient.IsNotFound(err):
			return r.gone(ctx, node, id, "does not exist")
		case err != nil:
			return r.apiError(ctx, err)
		}
	}
	if d.State == equinixapi.StateDeprovisioning || d.State == equinixapi.StateDeleted {
		return r.gone(ctx, node, d.ID, "is "+d.State)
	}

	// The addresses first: the uninitialized taint goes only once they
	// are written.
	if err := r.writeAddresses(ctx, node, d); err != nil {
		if errors.Is(err, errNoProvidedIP) {
			log.Info("not writing the Node's addresses", "reason", err.Error())
			return resync, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.writeSpec(ctx, node, d); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return reconciler.RequeueOnConflict(resync, err)
	}
	return resync, nil
}

// byHostname is the one device of the project (with the cluster's tag)
// whose hostname is name, that is not failed nor going; nil when there is
// none. Two such devices are an error: the Node could be either.
func (r *nodeReconciler) byHostname(ctx context.Context, name string) (*equinixapi.Device, error) {
	devices, err := r.o.API.ListDevices(ctx, r.o.ProjectID, metalclient.DeviceFilter{Hostname: name, Tag: r.o.ClusterTag})
	if err != nil {
		return nil, err
	}
	var found []equinixapi.Device
	for _, d := range devices {
		switch {
		case d.Hostname != name:
		case d.State == equinixapi.StateFailed, d.State == equinixapi.StateDeprovisioning, d.State == equinixapi.StateDeleted:
		default:
			found = append(found, d)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	ids := make([]string, len(found))
	for i, d := range found {
		ids[i] = d.ID
	}
	return nil, fmt.Errorf("%d devices have the hostname %s (%s): the Node is matched to none", len(found), name, strings.Join(ids, ", "))
}

// apiError waits after an error of the API: what a 429 names, a pause
// after a server error, the controller's backoff otherwise. A Node is
// never changed on an error.
func (r *nodeReconciler) apiError(ctx context.Context, err error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case metalclient.IsRateLimited(err):
		wait := metalclient.RetryAfter(err, time.Now())
		if wait <= 0 {
			wait = r.o.RetryInterval
		}
		log.Info("rate-limited by the Equinix Metal API", "retryAfter", wait)
		return ctrl.Result{RequeueAfter: wait}, nil
	case metalclient.IsServerError(err):
		log.Info("the Equinix Metal API failed; trying again", "error", err.Error(), "retryAfter", r.o.RetryInterval)
		return ctrl.Result{RequeueAfter: r.o.RetryInterval}, nil
	}
	return ctrl.Result{}, err
}

// gone deletes the Node of a device that is no more, once the Node is not
// Ready: a kubelet still reporting Ready is believed over the API until the
// node lifecycle controller marks it otherwise.
func (r *nodeReconciler) gone(ctx context.Context, node *corev1.Node, id, why string) (ctrl.Result, error) {
	if ready(node) {
		r.events.Eventf(node, nil, corev1.EventTypeNormal, "DeviceGone", "WaitForNotReady",
			"Device %s %s; the Node is deleted once it is not Ready", id, why)
		return ctrl.Result{RequeueAfter: r.o.ResyncInterval}, nil
	}
	ctrl.LoggerFrom(ctx).Info("deleting the Node: its device is gone", "device", id, "state", why)
	r.events.Eventf(node, nil, corev1.EventTypeNormal, "DeletingNode", "Delete", "Deleting Node %s: device %s %s", node.Name, id, why)
	// The UID precondition: a Node registered again under the name
	// meanwhile is another Node.
	err := r.c.Delete(ctx, node, client.Preconditions{UID: ptr.To(node.UID)})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

var errNoProvidedIP = errors.New("the kubelet's --node-ip is not an address of the device")

// Addresses are a Node's addresses from its device: the device's own
// (management) addresses, private ones as InternalIP and public ones as
// ExternalIP, IPv4 before IPv6, then its hostname. The elastic IPs assigned
// to the device are not the Node's: they move to another device when it
// goes.
func Addresses(d *equinixapi.Device) []corev1.NodeAddress {
	var internal, external []corev1.NodeAddress
	for _, a := range d.IPAddresses {
		if !a.Management || a.Address == "" {
			continue
		}
		if a.Public {
			external = append(external, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a.Address})
		} else {
			internal = append(internal, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.Address})
		}
	}
	v4First := func(a, b corev1.NodeAddress) int {
		return boolInt(!isIPv4(a.Address)) - boolInt(!isIPv4(b.Address))
	}
	slices.SortStableFunc(internal, v4First)
	slices.SortStableFunc(external, v4First)
	out := append(internal, external...)
	if d.Hostname != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: d.Hostname})
	}
	return out
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeAddresses patches status.addresses, which the cloud controller alone
// writes when the kubelet runs with --cloud-provider=external, with the
// device's, the kubelet's --node-ip first when it gave one.
func (r *nodeReconciler) writeAddresses(ctx context.Context, node *corev1.Node, d *equinixapi.Device) error {
	want := Addresses(d)
	if ip := node.Annotations[providedNodeIPAnnotation]; ip != "" {
		i := slices.IndexFunc(want, func(a corev1.NodeAddress) bool { return a.Address == ip && a.Type != corev1.NodeHostName })
		if i < 0 {
			return fmt.Errorf("%w: %s", errNoProvidedIP, ip)
		}
		want = append([]corev1.NodeAddress{want[i]}, slices.Delete(slices.Clone(want), i, i+1)...)
	}
	if slices.Equal(node.Status.Addresses, want) {
		return nil
	}
	before := node.DeepCopy()
	node.Status.Addresses = want
	// A merge patch replaces the list whole, with no resourceVersion: the
	// field has one writer.
	return r.c.Status().Patch(ctx, node, client.MergeFrom(before))
}

// writeSpec sets the providerID (once), the labels of the device's plan,
// metro and facility (when absent), drops the uninitialized taint and sets
// or drops the shutdown taint, in one patch under the resourceVersion read:
// taints and labels are shared with other writers, and a stale copy must
// not put back or drop theirs.
func (r *nodeReconciler) writeSpec(ctx context.Context, node *corev1.Node, d *equinixapi.Device) error {
	before := node.DeepCopy()
	if node.Spec.ProviderID == "" {
		node.Spec.ProviderID = ProviderIDPrefix + d.ID
	}
	setLabel := func(k, v string) {
		if v == "" {
			return
		}
		if _, ok := node.Labels[k]; !ok {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
		}
	}
	if d.Plan != nil {
		setLabel(InstanceTypeLabel, d.Plan.Slug)
	}
	if d.Metro != nil {
		setLabel(RegionLabel, d.Metro.Code)
	}
	if d.Facility != nil {
		setLabel(ZoneLabel, d.Facility.Code)
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == UninitializedTaint })
	switch d.State {
	case equinixapi.StateInactive, equinixapi.StatePoweringOff:
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == ShutdownTaint }) {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: ShutdownTaint, Effect: corev1.TaintEffectNoSchedule})
		}
	case equinixapi.StateActive:
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == ShutdownTaint })
	}
	if node.Spec.ProviderID == before.Spec.ProviderID && mapsEqual(node.Labels, before.Labels) &&
		slices.EqualFunc(node.Spec.Taints, before.Spec.Taints, sameTaint) {
		return nil
	}
	return r.c.Patch(ctx, node, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

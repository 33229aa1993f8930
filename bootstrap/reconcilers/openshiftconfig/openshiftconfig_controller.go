package openshiftconfig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	"sigs.k8s.io/cluster-api/util/predicates"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	ignitionapi "github.com/metalshift/metalshift/api/ignition/v1"
	"github.com/metalshift/metalshift/internal/ignition"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// IgnitionServer serves configs too large for user data behind signed
// tokens (api/ignition/v1): the bootstrap provider's ignition server.
type IgnitionServer interface {
	// URL is where the config in Secret namespace/name is served.
	URL(namespace, name string) string
	// CA is the PEM machines trust for URL; empty when they need none
	// beyond their system roots.
	CA() []byte
	// SignedToken authorizes reading Secret namespace/name, whose
	// controller has UID owner, until the time it returns.
	SignedToken(namespace, name string, owner types.UID) (string, time.Time)
	// RenewIn is how long until a token expiring at expiry should be
	// replaced; zero or less means now.
	RenewIn(expiry time.Time) time.Duration
}

// Reconciler reconciles OpenShiftConfigs.
type Reconciler struct {
	Client           client.Client
	APIReader        client.Reader
	WatchFilterValue string

	// IgnitionServer serves configs larger than MaxUserDataBytes; without
	// one such configs are refused with a condition.
	IgnitionServer IgnitionServer
	// MaxUserDataBytes is the largest config put in user data as is; 0
	// means DefaultMaxUserDataBytes.
	MaxUserDataBytes int
}

// DefaultMaxUserDataBytes is what user data holds on common metal clouds
// and config drives (64 KiB).
const DefaultMaxUserDataBytes = 64 << 10

// +kubebuilder:rbac:groups=bootstrap.cluster.x-k8s.io,resources=openshiftconfigs;openshiftconfigs/status;openshiftconfigs/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;create;update

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	clusterToAllConfigs, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &bootstrapv1.OpenShiftConfigList{}, mgr.GetScheme())
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&bootstrapv1.OpenShiftConfig{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(bootstrapv1.GroupVersion.WithKind("OpenShiftConfig")))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToConfigs)).
		// A Cluster paused or resumed: every config's Paused condition changes.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(clusterToAllConfigs),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		Complete(r)
}

// clusterToConfigs wakes a cluster's configs still waiting for their
// Secret, e.g. workers waiting for the control plane to be initialized.
func (r *Reconciler) clusterToConfigs(ctx context.Context, o client.Object) []reconcile.Request {
	cfgs := &bootstrapv1.OpenShiftConfigList{}
	if err := r.Client.List(ctx, cfgs, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range cfgs.Items {
		if !ptr.Deref(c.Status.Initialization.DataSecretCreated, false) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return reqs
}

// errWait means a precondition is missing, errInvalidSpec that the spec
// cannot be rendered; either way a condition says what.
var (
	errWait        = errors.New("waiting")
	errInvalidSpec = errors.New("invalid spec")
)

// Reconcile renders the config's Ignition Secret.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	cfg := &bootstrapv1.OpenShiftConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, cfg.ObjectMeta)
	if err != nil || machine == nil {
		return ctrl.Result{}, err
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, err
	}
	run, stop, err := reconciler.Begin(ctx, r.Client, cluster, cfg, bootstrapv1.DataSecretAvailableCondition)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer run.End(ctx, &reterr)
	if !cfg.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the Secrets are owned by the config
	}
	if ptr.Deref(cfg.Status.Initialization.DataSecretCreated, false) {
		// Rendered once, as the contract expects; only a served config's token is renewed.
		return r.renewServedToken(ctx, cfg, machine, cluster)
	}
	data, err := r.render(ctx, cfg, machine, cluster)
	served := 0
	if err == nil {
		data, served, err = r.fitUserData(ctx, cfg, cluster, data)
	}
	switch {
	case errors.Is(err, errInvalidSpec):
		return ctrl.Result{}, nil // a spec change wakes us
	case errors.Is(err, errWait):
		// The cluster CA Secret and endpoint are not watched: look again.
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.writeSecret(ctx, cfg, cluster, data, served)
}

// fitUserData returns data if it fits in user data; else it stores data in
// a Secret the ignition server serves and returns a config that merges it
// from there, and how large the served config is.
func (r *Reconciler) fitUserData(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, cluster *clusterv1.Cluster, data []byte) ([]byte, int, error) {
	limit := r.MaxUserDataBytes
	if limit == 0 {
		limit = DefaultMaxUserDataBytes
	}
	if len(data) <= limit {
		return data, 0, nil
	}
	if r.IgnitionServer == nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.UserDataTooLargeReason, fmt.Sprintf(
			"The Ignition config for a %s is %d bytes, more than the %d bytes user data holds, and the manager runs without an ignition server to serve it; "+
				"start it with one, or make the manifests or override smaller", cfg.Status.Role, len(data), limit))
		return nil, 0, errInvalidSpec
	}
	s, err := r.writeOwnedSecret(ctx, cfg, cluster, cfg.Name+servedSuffix, corev1.SecretTypeOpaque,
		map[string][]byte{"value": data}, ignitionapi.ServedLabel)
	if err != nil {
		return nil, 0, fmt.Errorf("writing the served Ignition Secret: %w", err)
	}
	pointer, _, err := r.remote(cfg, s)
	return pointer, len(data), err
}

// remote renders the config that merges served from the ignition server,
// with a new token, and when that token expires.
func (r *Reconciler) remote(cfg *bootstrapv1.OpenShiftConfig, served *corev1.Secret) ([]byte, time.Time, error) {
	token, expiry := r.IgnitionServer.SignedToken(served.Namespace, served.Name, cfg.UID)
	pointer, err := ignition.Remote(ignition.RemoteOptions{
		URL: r.IgnitionServer.URL(served.Namespace, served.Name), Token: token, CA: r.IgnitionServer.CA(), Full: served.Data["value"],
	})
	return pointer, expiry, err
}

// renewServedToken gives the data Secret of a served config a new token
// once half the old one's lifetime is gone, until the Machine's
// infrastructure is provisioned: a Machine that waits days for a free host
// still reads its config when it boots. Once provisioned, the host has its
// copy of the user data (the infrastructure provider copies it once) and
// boots within minutes; a host that boots after its token expired is
// refused (403) and its Machine must be replaced.
func (r *Reconciler) renewServedToken(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, machine *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if r.IgnitionServer == nil || cfg.Status.DataSecretName == nil || ptr.Deref(machine.Status.Initialization.InfrastructureProvisioned, false) {
		return ctrl.Result{}, nil
	}
	data := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: *cfg.Status.DataSecretName}, data); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	token, ok := ignition.RemoteToken(data.Data["value"])
	if !ok {
		return ctrl.Result{}, nil // the config is the user data itself
	}
	if expiry, ok := ignitionapi.TokenExpiry(token); ok {
		if wait := r.IgnitionServer.RenewIn(expiry); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	served := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Name + servedSuffix}, served); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pointer, expiry, err := r.remote(cfg, served)
	if err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.writeOwnedSecret(ctx, cfg, cluster, data.Name, data.Type,
		map[string][]byte{"value": pointer, "format": []byte("ignition")}); err != nil {
		return ctrl.Result{}, fmt.Errorf("renewing the token in the bootstrap data Secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Renewed the token of a served Ignition config: its Machine's infrastructure is not provisioned yet",
		"secret", klog.KObj(data), "expires", expiry.UTC().Format(time.RFC3339))
	return ctrl.Result{RequeueAfter: r.IgnitionServer.RenewIn(expiry)}, nil
}

// servedSuffix names the Secret with a config the ignition server serves.
const servedSuffix = "-ignition"

// role is the config's role, else derived from the Machine.
func role(cfg *bootstrapv1.OpenShiftConfig, m *clusterv1.Machine) string {
	if cfg.Spec.Role != "" {
		return cfg.Spec.Role
	}
	if util.IsControlPlaneMachine(m) {
		return bootstrapv1.RoleMaster
	}
	return bootstrapv1.RoleWorker
}

func (r *Reconciler) render(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, m *clusterv1.Machine, cluster *clusterv1.Cluster) ([]byte, error) {
	cfg.Status.Role = role(cfg, m)
	if cfg.Status.Role == bootstrapv1.RoleBootstrap {
		return r.bootstrapData(ctx, cfg)
	}
	ep := cluster.Spec.ControlPlaneEndpoint
	if ep.Host == "" {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForControlPlaneEndpointReason,
			"Waiting for Cluster "+cluster.Name+" to have a control-plane endpoint (the API VIP); the machine-config-server is reached there")
		return nil, errWait
	}
	if cfg.Status.Role == bootstrapv1.RoleWorker && !conditions.IsTrue(cluster, clusterv1.ClusterControlPlaneInitializedCondition) {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForControlPlaneInitReason,
			"Waiting for Cluster "+cluster.Name+"'s control plane to be initialized: workers fetch their config from the masters' machine-config-server")
		return nil, errWait
	}
	// The machine-config-server answers at api-int.<cluster>.<baseDomain>,
	// which resolves to the API VIP.
	mcsHost := cfg.Spec.MachineConfigServerHost
	if mcsHost == "" {
		mcsHost = ep.Host
	}
	ca := &corev1.Secret{}
	caName := secret.Name(cluster.Name, secret.ClusterCA)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: caName}, ca); err != nil || len(ca.Data[secret.TLSCrtDataName]) == 0 {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForClusterCAReason,
			fmt.Sprintf("Waiting for Secret %s/%s with the cluster CA (key %s)", cluster.Namespace, caName, secret.TLSCrtDataName))
		return nil, errWait
	}
	data, err := ignition.Pointer(ignition.PointerOptions{
		MachineConfigServer: "https://" + net.JoinHostPort(mcsHost, strconv.Itoa(bootstrapnode.MachineConfigServerPort)),
		Role:                cfg.Status.Role,
		RootCA:              ca.Data[secret.TLSCrtDataName],
		Override:            []byte(cfg.Spec.IgnitionOverride),
	})
	if errors.Is(err, ignition.ErrInvalidOverride) {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.InvalidIgnitionOverrideReason, "spec.ignitionOverride: "+err.Error())
		return nil, errInvalidSpec
	}
	return data, err
}

func (r *Reconciler) writeSecret(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, cluster *clusterv1.Cluster, data []byte, served int) error {
	s, err := r.writeOwnedSecret(ctx, cfg, cluster, cfg.Name, clusterv1.ClusterSecretType,
		map[string][]byte{"value": data, "format": []byte("ignition")})
	if err != nil {
		return fmt.Errorf("writing the bootstrap data Secret: %w", err)
	}
	cfg.Status.DataSecretName = ptr.To(s.Name)
	cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
	msg := "Ignition config for a " + cfg.Status.Role + " is in Secret " + s.Name
	if served > 0 {
		msg = fmt.Sprintf("Ignition config for a %s (%d bytes) is served by the hub's ignition server; Secret %s holds the config that fetches it",
			cfg.Status.Role, served, s.Name)
	}
	setCondition(cfg, metav1.ConditionTrue, bootstrapv1.DataSecretCreatedReason, msg)
	return nil
}

// writeOwnedSecret creates or updates a Secret of the cluster controlled by
// cfg, with the given extra labels set to "true".
func (r *Reconciler) writeOwnedSecret(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, cluster *clusterv1.Cluster,
	name string, typ corev1.SecretType, data map[string][]byte, labels ...string) (*corev1.Secret, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cfg.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, s, func() error {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[clusterv1.ClusterNameLabel] = cluster.Name
		shard.Propagate(cfg, s) // served by cfg's manager's ignition server
		for _, l := range labels {
			s.Labels[l] = "true"
		}
		s.Type = typ
		s.Data = data
		return controllerutil.SetControllerReference(cfg, s, r.Client.Scheme())
	})
	return s, err
}

func setCondition(cfg *bootstrapv1.OpenShiftConfig, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(cfg, metav1.Condition{Type: bootstrapv1.DataSecretAvailableCondition, Status: status, Reason: reason, Message: msg})
}

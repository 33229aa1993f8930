package cloudnodes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	capikubeconfig "sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/predicates"
	"sigs.k8s.io/cluster-api/util/secret"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/cloudnode"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloud"
	"github.com/metalshift/metalshift/internal/kubeconfig"
)

// The reasons of the Events recorded on an EquinixMetalCluster.
const (
	StartedReason = "CloudNodeControllerStarted"
	FailedReason  = "CloudNodeControllerFailed"
	StoppedReason = "CloudNodeControllerStopped"
)

// Defaults of the Reconciler's intervals.
const (
	DefaultRecheckInterval = time.Minute
	DefaultMinBackoff      = 5 * time.Second
	DefaultMaxBackoff      = 5 * time.Minute
)

// connectTimeout bounds the first request to a cluster's API, which tells
// whether it can be reached at all.
const connectTimeout = 15 * time.Second

// Reconciler starts and stops the clusters' cloud-node controllers. It is
// also the manager Runnable (leader only) whose context they run under.
type Reconciler struct {
	Client client.Client
	// APIReader reads the kubeconfig and credentials Secrets, which the
	// manager's client does not cache.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.Clock
	Cloud     cloud.Options
	// Node are the controllers' own options (ResyncInterval,
	// RetryInterval); the rest is set per cluster.
	Node cloudnode.Options
	// RecheckInterval is how often a cluster is looked at again, for a
	// rotated key: the credentials Secret is not watched (0: the default).
	RecheckInterval time.Duration
	// MinBackoff and MaxBackoff bound the pause before a failed controller
	// is started again (0: the defaults).
	MinBackoff, MaxBackoff time.Duration
	WatchFilterValue       string

	log     logr.Logger
	mu      sync.Mutex
	ctx     context.Context // the manager's, once Start runs
	started chan struct{}
	running map[types.NamespacedName]*runner
	wg      sync.WaitGroup
}

// runner is one cluster's controller.
type runner struct {
	log    logr.Logger
	hash   string
	cancel context.CancelFunc
	done   chan struct{}
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler, and the Runnable its
// controllers run under, with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	// The controllers log under the hub manager's logger, not under the
	// reconcile that started them.
	r.log = mgr.GetLogger().WithName("cloudnodes")
	r.started = make(chan struct{})
	r.running = map[types.NamespacedName]*runner{}
	if err := mgr.Add(r); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("equinixmetalcluster-cloudnode").
		For(&infrav1.EquinixMetalCluster{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(
			util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("EquinixMetalCluster"), mgr.GetClient(), &infrav1.EquinixMetalCluster{}),
		)).
		// The manager's cache holds the Secrets labelled with a cluster
		// name, as Cluster API's kubeconfig Secrets are.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.kubeconfigToCluster)).
		Complete(r)
}

// kubeconfigToCluster wakes the EquinixMetalCluster of a kubeconfig
// Secret's Cluster.
func (r *Reconciler) kubeconfigToCluster(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" || o.GetName() != secret.Name(name, secret.Kubeconfig) {
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

// NeedLeaderElection makes the controllers the leader's alone.
func (r *Reconciler) NeedLeaderElection() bool { return true }

// Start holds the controllers' context until the manager stops, then
// stops them all and waits for them.
func (r *Reconciler) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	close(r.started)
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	for _, run := range r.running {
		run.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

func (r *Reconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return DefaultRecheckInterval
}

// Reconcile starts, restarts or stops one cluster's controller.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	select {
	case <-r.started:
	case <-ctx.Done():
		return ctrl.Result{}, ctx.Err()
	}
	emc := &infrav1.EquinixMetalCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, emc); err != nil {
		if apierrors.IsNotFound(err) {
			r.stop(req.NamespacedName, nil, "the EquinixMetalCluster is gone")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !emc.DeletionTimestamp.IsZero() {
		r.stop(req.NamespacedName, emc, "the EquinixMetalCluster is being deleted")
		return ctrl.Result{}, nil
	}
	cluster, err := util.GetOwnerCluster(ctx, r.Client, emc.ObjectMeta)
	switch {
	case apierrors.IsNotFound(err):
		r.stop(req.NamespacedName, emc, "the Cluster is gone")
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	case cluster == nil:
		r.stop(req.NamespacedName, emc, "the EquinixMetalCluster belongs to no Cluster")
		return ctrl.Result{}, nil
	case !cluster.DeletionTimestamp.IsZero():
		r.stop(req.NamespacedName, emc, "the Cluster is being deleted")
		return ctrl.Result{}, nil
	case !ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false):
		r.stop(req.NamespacedName, emc, "the control plane is not initialized")
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Cluster", klog.KObj(cluster)))

	kc, err := capikubeconfig.FromSecret(ctx, r.APIReader, client.ObjectKeyFromObject(cluster))
	if apierrors.IsNotFound(err) {
		r.stop(req.NamespacedName, emc, "the kubeconfig Secret is gone")
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	cfg, err := kubeconfig.Load(kc)
	if err != nil {
		// Not asked again: a change of the Secret wakes the cluster.
		r.stop(req.NamespacedName, emc, "the kubeconfig Secret is not usable")
		r.Recorder.Eventf(emc, nil, corev1.EventTypeWarning, FailedReason, "Start", "The kubeconfig Secret of the Cluster is not usable: %v", err)
		return ctrl.Result{}, nil
	}
	key, err := r.apiKey(ctx, emc)
	if err == nil {
		_, err = cloud.Client(ctx, r.APIReader, emc, r.Cloud)
	}
	if err != nil {
		if errors.Is(err, cloud.ErrCredentials) {
			r.stop(req.NamespacedName, emc, "the credentials are unavailable")
			r.Recorder.Eventf(emc, nil, corev1.EventTypeWarning, FailedReason, "Start", "The cloud-node controller cannot start: %v", err)
			return ctrl.Result{RequeueAfter: r.recheck()}, nil
		}
		return ctrl.Result{}, err
	}
	tag := infrav1.EquinixMetalClusterTag(cluster.Namespace, cluster.Name)
	h := sha256.New()
	for _, part := range [][]byte{kc, key, []byte(emc.Spec.APIURL), []byte(emc.Spec.ProjectID), []byte(tag)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	r.start(ctx, req.NamespacedName, emc, cluster.Name, hex.EncodeToString(h.Sum(nil)), cfg, tag)
	return ctrl.Result{RequeueAfter: r.recheck()}, nil
}

// apiKey is the content of the credentials Secret's key, for the hash
// (cloud.Client reports a missing one).
func (r *Reconciler) apiKey(ctx context.Context, emc *infrav1.EquinixMetalCluster) ([]byte, error) {
	s := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: emc.Namespace, Name: emc.Spec.CredentialsRef.Name}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return s.Data[infrav1.EquinixMetalAPIKeyKey], nil
}

// start runs the cluster's controller, unless it runs already from the
// same hash; one from another hash is stopped first.
func (r *Reconciler) start(ctx context.Context, key types.NamespacedName, emc *infrav1.EquinixMetalCluster, cluster, hash string, cfg *rest.Config, tag string) {
	r.mu.Lock()
	cur := r.running[key]
	r.mu.Unlock()
	if cur != nil {
		if cur.hash == hash {
			return
		}
		r.stop(key, emc, "the kubeconfig, the key, the API URL or the project changed")
	}
	log := r.log.WithValues("EquinixMetalCluster", klog.KObj(emc), "Cluster", klog.KRef(emc.Namespace, cluster), "host", cfg.Host)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return // the manager is stopping
	}
	runCtx, cancel := context.WithCancel(r.ctx)
	run := &runner{log: log, hash: hash, cancel: cancel, done: make(chan struct{})}
	r.running[key] = run
	r.wg.Add(1)
	o := r.Node
	o.Config, o.ProjectID, o.ClusterTag = cfg, emc.Spec.ProjectID, tag
	regarding := emc.DeepCopy()
	go func() {
		defer r.wg.Done()
		defer close(run.done)
		r.loop(runCtx, log, regarding, o)
	}()
}

// stop stops the cluster's controller, if it runs, and waits for it to
// end; why says what changed. emc is nil when it is gone.
func (r *Reconciler) stop(key types.NamespacedName, emc *infrav1.EquinixMetalCluster, why string) {
	r.mu.Lock()
	run := r.running[key]
	delete(r.running, key)
	r.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	run.log.Info("Stopped the cloud-node controller", "why", why)
	if emc != nil {
		r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, StoppedReason, "Stop", "Stopped the cloud-node controller: %s", why)
	}
}

// loop runs the controller until ctx ends, starting it again after a
// failure.
func (r *Reconciler) loop(ctx context.Context, log logr.Logger, emc *infrav1.EquinixMetalCluster, o cloudnode.Options) {
	minB, maxB := r.MinBackoff, r.MaxBackoff
	if minB <= 0 {
		minB = DefaultMinBackoff
	}
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	backoff := minB
	for {
		began := r.Clock.Now()
		err := r.runOnce(ctx, log, emc, o)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("stopped")
		}
		if r.Clock.Since(began) > maxB {
			backoff = minB // it ran a while: not the same failure again
		}
		log.Error(err, "The cloud-node controller failed", "retryIn", backoff)
		r.Recorder.Eventf(emc, nil, corev1.EventTypeWarning, FailedReason, "Run", "The cloud-node controller failed, started again in %s: %v", backoff, err)
		select {
		case <-ctx.Done():
			return
		case <-r.Clock.After(backoff):
		}
		backoff = min(2*backoff, maxB)
	}
}

// runOnce reaches the cluster's API, then runs the controller in a
// manager of its own until ctx ends or it fails.
func (r *Reconciler) runOnce(ctx context.Context, log logr.Logger, emc *infrav1.EquinixMetalCluster, o cloudnode.Options) error {
	probe := rest.CopyConfig(o.Config)
	probe.Timeout = connectTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("reaching the cluster's API: %w", err)
	}
	// The key is read again: the controller holds it until it stops.
	api, err := cloud.Client(ctx, r.APIReader, emc, r.Cloud)
	if err != nil {
		return err
	}
	o.API = api
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(o.Config, ctrl.Options{
		Scheme:  scheme,
		Logger:  log,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// client-go's work queue, as every metalshift manager's; one
		// controller of this name per cluster.
		Controller: config.Controller{UsePriorityQueue: ptr.To(false), SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if err := cloudnode.Setup(mgr, o); err != nil {
		return err
	}
	log.Info("Started the cloud-node controller")
	r.Recorder.Eventf(emc, nil, corev1.EventTypeNormal, StartedReason, "Start", "Started the cloud-node controller against the cluster's API at %s", o.Config.Host)
	return mgr.Start(ctx)
}

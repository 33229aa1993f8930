package baremetalhost

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/predicates"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/internal/metrics"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// credentialsIndex indexes hosts by the name of their credentials Secret.
const credentialsIndex = "spec.bmc.credentialsName" //nolint:gosec // a field path, not a credential

// DeployImages makes the deploy image of a host's current request: the
// host engine's deploy server.
type DeployImages interface {
	// CheckBootConfig says what keeps the host's deploy image from being
	// made or used.
	CheckBootConfig(ctx context.Context, host *metal3v1.BareMetalHost) error
	// DeployImage returns freshly signed URLs of the host's deploy image.
	DeployImage(host *metal3v1.BareMetalHost) provisioner.DeployImage
}

// Reconciler reconciles BareMetalHosts.
type Reconciler struct {
	// Client is the manager's cached client, for lists.
	Client client.Client
	// Direct reads and writes hosts without the cache. A state handler
	// acts on hardware, and a cached copy older than this reconciler's own
	// last write would make it act twice (boot the deploy agent again,
	// write the disk again); End must compare against the
	// same fresh copy.
	Direct client.Client
	// Writes, when set, records the writes Direct makes of hosts, for the
	// deploy server given the same Writes: it reads a host from the API
	// while its cached copy is older than the engine's last write, instead
	// of writing on that copy and being refused. The engine reads hosts
	// from the API (Direct), so it never waits on Writes.Behind itself.
	Writes *reconciler.Writes
	// APIReader reads Secrets, which the manager does not cache.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Provisioners builds a driver from a BMC address and credentials.
	Provisioners provisioner.Factory
	Deploy       DeployImages
	Clock        clock.Clock
	// BackoffBase is the first retry delay after an error; it doubles per
	// consecutive error up to BackoffCap. Defaults: 2s and 5m.
	BackoffBase, BackoffCap time.Duration
	// PowerPollInterval is how often stable hosts have their power state
	// checked against spec.online; 0 means 60s.
	PowerPollInterval time.Duration
	// WatchFilterValue restricts the engine to hosts labelled
	// cluster.x-k8s.io/watch-filter=<value> (sharding across managers, as
	// every other controller of the hub); empty means every host.
	WatchFilterValue string

	provs   sync.Map      // host key → *cachedProvisioner
	secrets client.Reader // Secrets' metadata, from the cache SetupWithManager gets
}

type cachedProvisioner struct {
	key  string
	prov provisioner.Provisioner
}

// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts;baremetalhosts/status;baremetalhosts/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler. secrets is a cache that holds
// every Secret's metadata, so that fixing a credentials Secret wakes its hosts.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, secrets cache.Cache, options controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.BackoffBase == 0 {
		r.BackoffBase = 2 * time.Second
	}
	if r.BackoffCap == 0 {
		r.BackoffCap = 5 * time.Minute
	}
	if r.PowerPollInterval == 0 {
		r.PowerPollInterval = powerPollInterval
	}
	r.secrets = secrets
	if r.Writes != nil {
		r.Direct = r.Writes.Client(r.Direct)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3v1.BareMetalHost{}, credentialsIndex, func(o client.Object) []string {
		return []string{o.(*metal3v1.BareMetalHost).Spec.BMC.CredentialsName}
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3v1.BareMetalHost{}, bootMACIndex, indexBootMAC); err != nil {
		return err
	}
	if err := metrics.Add(mgr, []client.Object{&metal3v1.BareMetalHost{}}, r.newHostCollector(mgr.GetCache())); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&metal3v1.BareMetalHost{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue))).
		Named("baremetalhost").
		WithOptions(options).
		Owns(&metal3v1.PreprovisioningImage{}).
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(r.hostsForSecret))).
		Complete(r)
}

func (r *Reconciler) hostsForSecret(ctx context.Context, s *corev1.Secret) []reconcile.Request {
	hosts := &metal3v1.BareMetalHostList{}
	opts := []client.ListOption{client.InNamespace(s.Namespace), client.MatchingFields{credentialsIndex: s.Name}}
	if r.WatchFilterValue != "" {
		opts = append(opts, client.MatchingLabels{clusterv1.WatchLabel: r.WatchFilterValue})
	}
	if err := r.Client.List(ctx, hosts, opts...); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(hosts.Items))
	for _, h := range hosts.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&h)})
	}
	return reqs
}

// Reconcile runs the handler of the host's state once and applies its result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	host := &metal3v1.BareMetalHost{}
	if err := r.Direct.Get(ctx, req.NamespacedName, host); err != nil {
		if apierrors.IsNotFound(err) {
			r.provs.Delete(req.String())
			r.Writes.Forget(host, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !shard.Owns(r.WatchFilterValue, host) {
		// Another manager's host, woken by its PreprovisioningImage.
		r.provs.Delete(req.String())
		return ctrl.Result{}, nil
	}
	if _, paused := host.Annotations[metal3v1.PausedAnnotation]; paused {
		return ctrl.Result{}, nil
	}
	deleting := !host.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(host, metal3v1.BareMetalHostFinalizer) {
		return ctrl.Result{}, nil
	}
	// End writes what the state's handler changed, compared with the
	// fresh copy read: metadata and spec as a patch of the changed fields,
	// the status in one patch, the engine's conditions merged with other
	// writers' (BMAC's); a transition's metric is recorded once it is
	// written.
	run, err := reconciler.Start(r.Direct, host, reconciler.OwnedConditions(ownedConditions...), reconciler.OneStatusWrite())
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &hostScope{host: host, recorder: r.Recorder, now: r.Clock.Now}
	defer func() {
		setConditions(host)
		s.stateChangedEvent()
		run.End(ctx, &reterr)
		if run.Patched() && s.changed != nil {
			recordWrittenTransition(host, s.changed.from, s.changed.to)
		}
	}()
	controllerutil.AddFinalizer(host, metal3v1.BareMetalHostFinalizer)

	if _, detached := host.Annotations[metal3v1.DetachedAnnotation]; detached {
		host.Status.OperationalStatus = metal3v1.OperationalStatusDetached
		if deleting {
			r.provs.Delete(req.String())
			controllerutil.RemoveFinalizer(host, metal3v1.BareMetalHostFinalizer)
		}
		return ctrl.Result{}, nil
	}
	if host.Status.OperationalStatus == metal3v1.OperationalStatusDetached {
		host.Status.OperationalStatus = metal3v1.OperationalStatusOK
	}

	if host.Annotations[metal3v1.InspectAnnotation] == metal3v1.InspectAnnotationValueDisabled && host.Status.Provisioning.State != metal3v1.StateInspecting {
		// Without inspection, hardware details may come at any time from
		// the annotation (the agent-based install writes the Agent's
		// inventory there).
		if res, ok := hardwareFromAnnotation(s).(actionError); ok {
			return ctrl.Result{RequeueAfter: r.recordError(s, res)}, nil
		}
	}
	r.buildProvisioner(ctx, s)
	if deleting && host.Status.Provisioning.State != metal3v1.StatePoweringOffBeforeDelete && host.Status.Provisioning.State != metal3v1.StateDeleting {
		r.transition(ctx, s, metal3v1.StatePoweringOffBeforeDelete)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if !deleting {
		if err := r.ensurePreprovisioningImage(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.run(ctx, s)
}

// run runs the handler of the current state and applies the result. A
// state whose work is done ends the reconcile with its transition, so
// that every state a host passes through is a status write of its own,
// which a watcher of the host (kubectl get bmh -w) sees; the next state's
// handler runs in the next reconcile.
func (r *Reconciler) run(ctx context.Context, s *hostScope) (ctrl.Result, error) {
	host := s.host
	state := host.Status.Provisioning.State
	h, ok := r.stateMachine()[state]
	if !ok {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("BareMetalHost %s is in unknown state %q", klog.KObj(host), state))
	}
	res := h(ctx, s)
	r.applySideEffects(s)
	switch res := res.(type) {
	case actionComplete:
		if err := checkTransition(state, res.next); err != nil {
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		r.clearError(host)
		setBMCCondition(host, nil)
		host.Status.ErrorCount = 0
		r.transition(ctx, s, res.next)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	case actionWait:
		r.clearError(host)
		setBMCCondition(host, nil)
		host.Status.ErrorCount = 0
		return ctrl.Result{RequeueAfter: res.after}, nil
	case actionError:
		return ctrl.Result{RequeueAfter: r.recordError(s, res)}, nil
	}
	return ctrl.Result{}, fmt.Errorf("handler of state %q returned %T", state, res)
}

func (r *Reconciler) applySideEffects(s *hostScope) {
	if s.removeFinalizer {
		r.provs.Delete(client.ObjectKeyFromObject(s.host).String())
		controllerutil.RemoveFinalizer(s.host, metal3v1.BareMetalHostFinalizer)
	}
	for _, k := range s.removeAnnotations {
		delete(s.host.Annotations, k)
	}
	if s.archToSet != "" {
		s.host.Spec.Architecture = s.archToSet
	}
}

func (r *Reconciler) transition(ctx context.Context, s *hostScope, to metal3v1.ProvisioningState) {
	host := s.host
	from := host.Status.Provisioning.State
	now := metav1.NewTime(r.Clock.Now().Truncate(time.Second))
	recordTransition(&host.Status.OperationHistory, from, to, now)
	s.changed = &transition{from: from, to: to}
	host.Status.Provisioning.State = to
	host.Status.LastUpdated = &now
	if host.Status.OperationalStatus == "" || host.Status.OperationalStatus == metal3v1.OperationalStatusDiscovered && to != metal3v1.StateUnmanaged {
		host.Status.OperationalStatus = metal3v1.OperationalStatusOK
	}
	ctrl.LoggerFrom(ctx).Info("Host changed state", "from", string(from), "to", string(to))
}

func displayState(s metal3v1.ProvisioningState) string {
	if s == "" {
		return "new"
	}
	return string(s)
}

func (r *Reconciler) clearError(host *metal3v1.BareMetalHost) {
	if host.Status.ErrorType == "" && host.Status.ErrorMessage == "" {
		return
	}
	host.Status.ErrorType, host.Status.ErrorMessage = "", ""
	if host.Status.OperationalStatus == metal3v1.OperationalStatusError {
		host.Status.OperationalStatus = metal3v1.OperationalStatusOK
	}
}

// recordError puts the error in the status and an Event, and returns the
// backoff delay.
func (r *Reconciler) recordError(s *hostScope, e actionError) time.Duration {
	host := s.host
	changed := host.Status.ErrorMessage != e.msg || host.Status.ErrorType != e.errType
	host.Status.ErrorType, host.Status.ErrorMessage = e.errType, e.msg
	host.Status.OperationalStatus = metal3v1.OperationalStatusError
	setBMCCondition(host, &e)
	host.Status.ErrorCount++
	if changed {
		now := metav1.NewTime(r.Clock.Now().Truncate(time.Second))
		host.Status.LastUpdated = &now
		s.event(corev1.EventTypeWarning, errorReason(e.errType), "Reconcile", "%s", e.msg)
	}
	return backoff(r.BackoffBase, r.BackoffCap, host.Status.ErrorCount)
}

// backoff is base·2^(count-1), capped.
func backoff(base, cap time.Duration, count int) time.Duration {
	if count < 1 {
		count = 1
	}
	d := float64(base) * math.Pow(2, float64(count-1))
	if d > float64(cap) {
		return cap
	}
	return time.Duration(d)
}

// buildProvisioner reads the credentials and builds (or reuses) the driver.
func (r *Reconciler) buildProvisioner(ctx context.Context, s *hostScope) {
	host := s.host
	if host.Spec.BMC.Address == "" {
		return
	}
	name := host.Spec.BMC.CredentialsName
	if name == "" {
		s.provErr = fail(metal3v1.RegistrationError, "spec.bmc.credentialsName is empty: name a Secret with keys username and password")
		return
	}
	hostKey := client.ObjectKeyFromObject(host).String()
	secKey := client.ObjectKey{Namespace: host.Namespace, Name: name}
	// A driver built from this version of the Secret is reused without
	// reading the credentials again; the metadata cache tells the version.
	if meta := (&corev1.Secret{}); r.secrets != nil && r.secrets.Get(ctx, secKey, meta) == nil {
		if c, ok := r.provs.Load(hostKey); ok && c.(*cachedProvisioner).key == provisionerKey(host, meta) {
			s.useCredentials(meta)
			s.prov = c.(*cachedProvisioner).prov
			return
		}
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, secKey, sec); err != nil {
		if apierrors.IsNotFound(err) {
			s.provErr = fail(metal3v1.RegistrationError, fmt.Sprintf("BMC credentials Secret %s/%s not found: create it with keys username and password", host.Namespace, name))
		} else {
			s.provErr = fail(metal3v1.RegistrationError, fmt.Sprintf("Reading BMC credentials Secret %s/%s failed: %v", host.Namespace, name, err))
		}
		return
	}
	for _, k := range []string{"username", "password"} {
		if len(sec.Data[k]) == 0 {
			s.provErr = fail(metal3v1.RegistrationError, fmt.Sprintf("BMC credentials Secret %s/%s has no %q key", host.Namespace, name, k))
			return
		}
	}
	s.useCredentials(sec)
	key := provisionerKey(host, sec)
	if c, ok := r.provs.Load(hostKey); ok && c.(*cachedProvisioner).key == key {
		s.prov = c.(*cachedProvisioner).prov
		return
	}
	p, err := r.Provisioners.New(host.Spec.BMC.Address, host.Spec.BMC.DisableCertificateVerification,
		provisioner.Credentials{Username: string(sec.Data["username"]), Password: string(sec.Data["password"])})
	if err != nil {
		s.provErr = fail(metal3v1.RegistrationError, err.Error())
		return
	}
	r.provs.Store(hostKey, &cachedProvisioner{key: key, prov: p})
	s.prov = p
}

// provisionerKey identifies what a driver was built from.
func provisionerKey(host *metal3v1.BareMetalHost, sec *corev1.Secret) string {
	return fmt.Sprintf("%s|%t|%s|%s", host.Spec.BMC.Address, host.Spec.BMC.DisableCertificateVerification, sec.UID, sec.ResourceVersion)
}

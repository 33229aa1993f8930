// Package agentclusterinstall reconciles AgentClusterInstalls and their
// ClusterDeployments: the cluster's validations, status and conditions;
// starting the install when its requirements are met (choosing the
// bootstrap master, making the install state); following the installed
// cluster (its Nodes and ClusterVersion) to the end; and what Hive would do
// with the result (installed, clusterMetadata, the admin Secrets, the
// install conditions mirrored on the ClusterDeployment).
package agentclusterinstall

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/clusterstate"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/installstate"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
	"github.com/metalshift/metalshift/internal/metrics"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// Reconciler reconciles AgentClusterInstalls.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	// Spoke reads the installed cluster with its admin kubeconfig.
	Spoke SpokeReader
	// EventsURL signs events URLs (server.Server.EventsURL); nil leaves
	// status.debugInfo.eventsURL empty.
	EventsURL func(filters ...string) string
	// ContactEvery is how stale the agent service lets an Agent's recorded
	// last contact get (server.Options.HeartbeatEvery; 0 means a minute):
	// a host is silent only once its last contact is older than that.
	ContactEvery time.Duration
	// configMaps reads manifests ConfigMaps, live (setupManifests).
	configMaps client.Reader
	// live reads an install from the API rather than the cache
	// (freshTransition); nil reads through Client.
	live client.Reader
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
	// Writes are the manager's reconcilers' last writes the cache has not
	// seen yet: a reconcile of an object older than one waits for the
	// cache (reconciler.Writes); nil reconciles from the cache as read.
	Writes *reconciler.Writes
}

// +kubebuilder:rbac:groups=extensions.hive.openshift.io,resources=agentclusterinstalls;agentclusterinstalls/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hive.openshift.io,resources=clusterdeployments;clusterdeployments/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents/status,verbs=patch
// +kubebuilder:rbac:groups=hive.openshift.io,resources=clusterimagesets,verbs=get;list;watch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agentserviceconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Spoke == nil {
		r.Spoke = KubeconfigSpoke{}
	}
	r.live = mgr.GetAPIReader()
	if err := r.setupManifests(mgr); err != nil {
		return err
	}
	if err := metrics.Add(mgr, []client.Object{&hiveextv1.AgentClusterInstall{}}, newACICollector(mgr.GetCache(), r.WatchFilterValue)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&hiveextv1.AgentClusterInstall{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&hivev1.ClusterDeployment{}, handler.EnqueueRequestsFromMapFunc(aciOfCD)).
		Watches(&agentinstallv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.aciOfAgent)).
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.acisOfConfigMap)).
		WithOptions(opts).
		Named("agentclusterinstall").
		Complete(r)
}

func aciOfCD(_ context.Context, o client.Object) []ctrl.Request {
	cd := o.(*hivev1.ClusterDeployment)
	if ref := cd.Spec.ClusterInstallRef; ref != nil && ref.Kind == "AgentClusterInstall" {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: cd.Namespace, Name: ref.Name}}}
	}
	return nil
}

func (r *Reconciler) aciOfAgent(ctx context.Context, o client.Object) []ctrl.Request {
	a := o.(*agentinstallv1.Agent)
	c, err := rec.ForAgent(ctx, r.Client, a)
	if err != nil || c == nil {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKeyFromObject(c.ACI)}}
}

// Reconcile moves an install along. The fields of the install's status
// are this reconciler's alone (docs/agent-install.md, status ownership):
// reconciler.End writes what changed as patches of those fields.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	aci := &hiveextv1.AgentClusterInstall{}
	if err := r.Client.Get(ctx, req.NamespacedName, aci); err != nil || !shard.Owns(r.WatchFilterValue, aci) {
		if apierrors.IsNotFound(err) {
			r.Writes.Forget(aci, req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Writes.Behind(aci) {
		return ctrl.Result{RequeueAfter: reconciler.CacheBehindRequeue}, nil
	}
	if aci.DeletionTimestamp != nil {
		return reconciler.RequeueOnConflict(r.reconcileDelete(ctx, aci))
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, aci, Finalizer); err != nil || added {
		return reconciler.RequeueOnConflict(ctrl.Result{}, err)
	}
	run, err := reconciler.Start(r.Client, aci)
	if err != nil {
		return ctrl.Result{}, err
	}
	in := &install{r: r, now: r.Clock.Now()}
	from := aci.Status.DebugInfo.State
	defer func() {
		if r.EventsURL != nil {
			aci.Status.DebugInfo.EventsURL = r.EventsURL("cluster_id", string(aci.UID))
		}
		fresh := r.freshTransition(ctx, aci, from)
		run.End(ctx, &reterr)
		if run.Patched() && fresh {
			r.recordTransition(aci, from)
			if in.c != nil {
				in.observeInstalled(from)
			}
		}
		res, reterr = reconciler.RequeueOnConflict(res, reterr)
	}()
	cd := &hivev1.ClusterDeployment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: aci.Namespace, Name: aci.Spec.ClusterDeploymentRef.Name}, cd); err != nil {
		if apierrors.IsNotFound(err) {
			conditions.SetInstall(&aci.Status.Conditions, in.now,
				conditions.ACISpecSynced(fmt.Errorf("ClusterDeployment %s not found", aci.Spec.ClusterDeploymentRef.Name), false))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	in.c = &rec.Cluster{CD: cd, ACI: aci}
	if in.agents, err = rec.Agents(ctx, r.Client, cd); err != nil {
		return ctrl.Result{}, err
	}
	sort.Slice(in.agents, func(i, j int) bool { return in.agents[i].Name < in.agents[j].Name })
	return in.run(ctx)
}

// freshTransition tells whether this reconcile moves the install out of
// state from, as the API has it. Reconciles of one install run one at a
// time, but one may start from a cached copy older than the last write
// and make again (writing the same value) a transition already made: its
// Event and the install-duration metric are recorded once, by the
// reconcile that made it.
func (r *Reconciler) freshTransition(ctx context.Context, aci *hiveextv1.AgentClusterInstall, from string) bool {
	if from == aci.Status.DebugInfo.State {
		return false
	}
	if r.Writes.Current(aci) {
		// This process wrote it last, and the copy has that write: its
		// state, which only this reconciler writes, is the API's.
		return true
	}
	reader := r.live
	if reader == nil {
		reader = r.Client
	}
	cur := &hiveextv1.AgentClusterInstall{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(aci), cur); err != nil {
		return true
	}
	return cur.Status.DebugInfo.State == from
}

// recordTransition records the cluster's state change, once written.
func (r *Reconciler) recordTransition(aci *hiveextv1.AgentClusterInstall, from string) {
	to := aci.Status.DebugInfo.State
	typ := corev1.EventTypeNormal
	if to == clusterstate.StatusError {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(aci, typ, "ClusterStatusUpdated", "Updated status of the cluster to %s (%s)", to, aci.Status.DebugInfo.StateInfo)
}

// install is one reconcile of an install.
type install struct {
	r      *Reconciler
	c      *rec.Cluster
	agents []agentinstallv1.Agent
	now    time.Time

	version string
	specErr error
	input   bool
	// manifests are the user's, read when the install is about to start.
	manifests map[string][]byte

	// state is the install-state Secret (nil before the install), read
	// once per reconcile; spoke is what the installed cluster reported,
	// read at most once.
	state      *corev1.Secret
	spokeView  *SpokeView
	spokeErr   error
	spokeTried bool
	// kubeconfig is the installed cluster's admin kubeconfig, read at most
	// once (an imported cluster's is a Secret read from the API).
	kubeconfig []byte
	// counts are the hosts per role and their approval and sync, from the
	// one pass over the Agents.
	counts conditions.ACIInput
	hosts  []clusterstate.HostSummary
}

func (in *install) run(ctx context.Context) (ctrl.Result, error) {
	c := in.c
	if is, err := rec.ImageSet(ctx, in.r.Client, c); err != nil {
		in.specErr, in.input = err, c.ACI.Spec.ImageSetRef == nil
	} else {
		in.version = rec.OpenshiftVersion(is.Spec.ReleaseImage)
		if in.version == "" {
			in.specErr, in.input = fmt.Errorf("failed to get release image '%s'. Please ensure the releaseImage field in ClusterImageSet '%s' is valid", is.Spec.ReleaseImage, is.Name), true
		} else if _, err := rec.OSImage(ctx, in.r.Client, in.version, ""); err != nil {
			in.specErr = err
		}
	}
	if in.specErr == nil {
		if _, err := rec.PullSecret(ctx, in.r.Client, c.CD.Namespace, c.CD.Spec.PullSecretRef); err != nil {
			in.specErr, in.input = err, c.CD.Spec.PullSecretRef == nil
		}
	}
	// Until the install starts, its state is looked for in the Secret
	// cache alone: prepare writes it, and AlreadyExists there keeps the
	// first.
	var stateOpts []client.GetOption
	if !rec.Started(c.ACI) {
		stateOpts = append(stateOpts, rec.CacheSuffices)
	}
	var err error
	if in.state, err = rec.InstallState(ctx, in.r.Client, c.ACI, stateOpts...); err != nil {
		return ctrl.Result{}, err
	}
	if in.specErr == nil {
		if err := in.importedKubeconfig(ctx); err != nil {
			in.specErr, in.input = err, true
		}
	}
	facts, v := in.facts(ctx)
	state, info := clusterstate.Refresh(facts)
	in.checkOverrides(ctx, state == clusterstate.StatusPreparingForInstallation && !facts.PreparationDone)
	requeue := 30 * time.Second
	switch {
	case state == clusterstate.StatusPreparingForInstallation && in.specErr != nil && facts.Status != state:
		// Not started: what the install needs is missing (SpecSynced says what).
		state, info = facts.Status, facts.StatusInfo
	case state == clusterstate.StatusPreparingForInstallation && !facts.PreparationDone:
		if err := in.prepare(ctx); err != nil {
			return ctrl.Result{}, err
		}
		in.r.Recorder.Event(c.ACI, corev1.EventTypeNormal, "InstallationStarted", "The installation started: the requirements are met")
		requeue = time.Second
	case state == clusterstate.StatusInstalling || state == clusterstate.StatusFinalizing || state == clusterstate.StatusPreparingForInstallation ||
		state == clusterstate.StatusInstallingPendingUserAction:
		// Pending the user's fix of a host's boot, the hosts are followed
		// too: the fixed host's Joined is what ends the wait.
		requeue = 2 * time.Second
		if err := in.follow(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Info("Following the installed cluster", "error", err.Error())
		}
	case state == clusterstate.StatusInstalled || state == clusterstate.StatusAddingHosts:
		if err := in.complete(ctx); err != nil {
			return ctrl.Result{}, err
		}
		// Day 2: hosts added to the installed cluster join it.
		if in.day2Joining() {
			requeue = 2 * time.Second
			if err := in.approveCSRs(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Info("Approving day-2 hosts' CSRs", "error", err.Error())
			}
			if err := in.follow(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Info("Following the installed cluster", "error", err.Error())
			}
		}
	}
	if err := in.setStatus(ctx, state, info, v); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// facts are what the cluster state machine reads.
func (in *install) facts(ctx context.Context) (clusterstate.Facts, validations.Results) {
	c := in.c
	req := c.ACI.Spec.ProvisionRequirements
	ci := validations.ClusterInput{
		SNO: c.SNO(), OpenshiftVersion: in.version, APIVIPs: installstate.APIVIPs(c.ACI), IngressVIPs: installstate.IngressVIPs(c.ACI),
		BaseDomain: c.CD.Spec.BaseDomain, NetworkType: c.ACI.Spec.Networking.NetworkType, ServiceNetworks: c.ACI.Spec.Networking.ServiceNetwork,
		PullSecretSet: c.CD.Spec.PullSecretRef != nil, RequiredMasters: req.ControlPlaneAgents, RequiredWorkers: req.WorkerAgents,
		UserManagedNetworking: c.ACI.Spec.Networking.UserManagedNetworking != nil && *c.ACI.Spec.Networking.UserManagedNetworking,
	}
	ci.MachineNetworks = rec.MachineNetworks(c, in.agents)
	for _, n := range c.ACI.Spec.Networking.ClusterNetwork {
		ci.ClusterNetworks = append(ci.ClusterNetworks, n.CIDR)
	}
	f := clusterstate.Facts{Status: c.State(), StatusInfo: c.ACI.Status.DebugInfo.StateInfo, Held: c.ACI.Spec.HoldInstallation || c.CD.Annotations["hive.openshift.io/reconcile-pause"] == "true",
		HostsRequired: req.ControlPlaneAgents + req.WorkerAgents + req.ArbiterAgents, SNO: c.SNO(), Day2: !c.SNO(),
		Imported: rec.Imported(c.CD, in.state)}
	n := &in.counts
	*n = conditions.ACIInput{Held: c.ACI.Spec.HoldInstallation,
		RequiredMasters: req.ControlPlaneAgents, RequiredArbiters: req.ArbiterAgents, RequiredWorkers: req.WorkerAgents}
	for i := range in.agents {
		a := &in.agents[i]
		role, state := rec.Role(a), a.Status.DebugInfo.State
		ci.Hosts = append(ci.Hosts, validations.ClusterHost{Role: role, Status: state, Approved: a.Spec.Approved})
		in.hosts = append(in.hosts, clusterstate.HostSummary{Role: role, Bootstrap: a.Status.Bootstrap, Status: state,
			Stage: assistedapi.HostStage(a.Status.Progress.CurrentStage)})
		if !a.Spec.Approved {
			n.Unapproved++
		}
		if conditionStatus(a, "SpecSynced") == corev1.ConditionFalse {
			n.Unsynced++
		}
		switch role {
		case "master":
			n.Masters++
		case "worker":
			n.Workers++
		case "arbiter":
			n.Arbiters++
		}
		if a.Spec.Approved && state == hoststate.StatusKnown {
			f.HostsReady++
		}
	}
	f.HostStatuses, f.UnapprovedAgents, f.UnsyncedAgents = in.hosts, n.Unapproved, n.Unsynced
	f.RoleCountsMatch = n.Masters == req.ControlPlaneAgents && n.Workers == req.WorkerAgents
	v := validations.Cluster(ci)
	f.Validations = v
	f.PreparationDone = in.prepared()
	f.Installed = c.ACI.Status.DebugInfo.State == clusterstate.StatusInstalled || in.spokeInstalled(ctx)
	return f, v
}

func conditionStatus(a *agentinstallv1.Agent, t string) corev1.ConditionStatus {
	for _, c := range a.Status.Conditions {
		if string(c.Type) == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// prepare starts the install: the bootstrap master (the last master by
// name, as upstream) and the install state.
func (in *install) prepare(ctx context.Context) error {
	c := in.c
	var bootstrap *agentinstallv1.Agent
	for i := range in.agents {
		if rec.Role(&in.agents[i]) == "master" {
			bootstrap = &in.agents[i]
		}
	}
	if bootstrap == nil {
		return fmt.Errorf("no master to bootstrap the cluster")
	}
	addr := ""
	if c.SNO() {
		addr = hostAddress(bootstrap)
	}
	if in.state == nil {
		st, err := installstate.New(installstate.Inputs{CD: c.CD, ACI: c.ACI, Version: in.version, SNOAddress: addr, Manifests: in.manifests})
		if err != nil {
			return err
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.ACI.Namespace, Name: rec.InstallStateName(c.ACI)}, Data: st.Data()}
		rec.Cached(sec)
		if err := controllerutil.SetControllerReference(c.ACI, sec, in.r.Client.Scheme()); err != nil {
			return err
		}
		if err := in.r.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// status.bootstrap is this reconciler's field of the Agent: a patch of
	// it alone (the same master is chosen again until it is read back).
	if bootstrap.Status.Bootstrap {
		return nil
	}
	before := bootstrap.DeepCopy()
	bootstrap.Status.Bootstrap = true
	return in.r.Client.Status().Patch(ctx, bootstrap, client.MergeFrom(before))
}

// prepared tells whether the install state exists and a bootstrap master
// was chosen.
func (in *install) prepared() bool {
	if in.state == nil {
		return false
	}
	for i := range in.agents {
		if in.agents[i].Status.Bootstrap {
			return true
		}
	}
	return false
}

// hostAddress is a host's first IPv4 address, without its prefix length.
func hostAddress(a *agentinstallv1.Agent) string {
	for _, n := range a.Status.Inventory.Interfaces {
		if len(n.IPV4Addresses) > 0 {
			ip, _, _ := strings.Cut(n.IPV4Addresses[0], "/")
			return ip
		}
	}
	return ""
}

// setStatus sets the install's status (End writes it) and writes its
// mirror on the ClusterDeployment.
func (in *install) setStatus(ctx context.Context, state, info string, v validations.Results) error {
	c := in.c
	counts := in.counts
	counts.Status, counts.StatusInfo, counts.V = state, info, v
	conds := append([]conditions.Cond{conditions.ACISpecSynced(in.specErr, in.input)}, conditions.ACI(counts)...)
	st := &c.ACI.Status
	st.DebugInfo.State, st.DebugInfo.StateInfo = state, info
	st.Progress.TotalPercentage = clusterstate.ProgressFor(state, in.hosts, c.SNO())
	st.ValidationsInfo = v.Status()
	st.ControlPlaneAgentsDiscovered, st.WorkerAgentsDiscovered = counts.Masters, counts.Workers
	conditions.SetInstall(&st.Conditions, in.now, conds...)
	return in.r.mirrorConditions(ctx, c.CD, st.Conditions)
}

// writeStatus applies change to the status and writes it when it changed;
// written tells whether it did (a conflict leaves it to the next reconcile).

// Package agent reconciles Agents: from an Agent's record (inventory,
// reports, last contact) and its cluster it computes the host's
// validations, status (status.debugInfo.state) and conditions, suggests its
// role and picks its installation disk.
package agent

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	events "k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/coreos/ignition/v2/config/v3_4"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/pkg/validations"
	"github.com/metalshift/metalshift/internal/metrics"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// DisconnectedAfter is how long an agent may stay silent before its host
// is disconnected (upstream: 3 minutes).
const DisconnectedAfter = 3 * time.Minute

// disconnectedAfter is the reconciler's timeout.
func (r *Reconciler) disconnectedAfter() time.Duration {
	if r.DisconnectedAfter > 0 {
		return r.DisconnectedAfter
	}
	return DisconnectedAfter
}

// silentSince is when a's agent's silence began, as the hub can tell: its
// last contact, or, when the agent service started serving later than
// that, the start (the agent may have tried while the hub was away). Zero
// when the agent never made contact.
func (r *Reconciler) silentSince(a *agentinstallv1.Agent) time.Time {
	last := record.LastContact(a)
	if !last.IsZero() && r.ServiceStart.After(last) {
		return r.ServiceStart
	}
	return last
}

// Reconciler reconciles Agents.
type Reconciler struct {
	Client client.Client
	// Recorder records the host's status changes, which its events URL
	// serves.
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// EventsURL signs events URLs (server.Server.EventsURL); nil leaves
	// status.debugInfo.eventsURL empty.
	EventsURL func(filters ...string) string
	// DisconnectedAfter overrides the const DisconnectedAfter when > 0.
	DisconnectedAfter time.Duration
	// ServiceStart is when this process's agent service started serving:
	// an agent's silence counts from the later of its last contact and
	// this, so that the hub's own downtime (agents could not reach it)
	// does not disconnect its hosts. It is this process's, not recorded:
	// after a restart every agent has a full DisconnectedAfter again.
	// Zero counts from the last contact only.
	ServiceStart time.Time
	// Timeouts limit a host's install and each of its stages; zero fields
	// take upstream's defaults (hoststate.Timeouts).
	Timeouts hoststate.Timeouts
	// live reads an Agent from the API rather than the cache
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

// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents;agents/status,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.live = mgr.GetAPIReader()
	if err := metrics.Add(mgr, []client.Object{&agentinstallv1.Agent{}}, newAgentCollector(mgr.GetCache(), r.WatchFilterValue)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentinstallv1.Agent{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&hiveextv1.AgentClusterInstall{}, handler.EnqueueRequestsFromMapFunc(r.agentsOfACI)).
		WithOptions(opts).
		Named("agent").
		Complete(r)
}

// agentsOfACI wakes the Agents of an install when it changes (its state
// drives theirs).
func (r *Reconciler) agentsOfACI(ctx context.Context, o client.Object) []ctrl.Request {
	aci := o.(*hiveextv1.AgentClusterInstall)
	cd := &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: aci.Namespace, Name: aci.Spec.ClusterDeploymentRef.Name}}
	agents, err := record.Agents(ctx, r.Client, cd)
	if err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(agents))
	for _, a := range agents {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	return reqs
}

// Reconcile computes an Agent's status: the fields this reconciler owns
// (docs/agent-install.md, status ownership), written by reconciler.End as
// patches of what changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	a := &agentinstallv1.Agent{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil || !shard.Owns(r.WatchFilterValue, a) {
		if apierrors.IsNotFound(err) {
			r.Writes.Forget(a, req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Writes.Behind(a) {
		return ctrl.Result{RequeueAfter: reconciler.CacheBehindRequeue}, nil
	}
	if a.DeletionTimestamp != nil {
		return reconciler.RequeueOnConflict(ctrl.Result{}, r.reconcileDelete(ctx, a))
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, a, Finalizer); err != nil || added {
		return reconciler.RequeueOnConflict(ctrl.Result{}, err)
	}
	c, err := record.ForAgent(ctx, r.Client, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	var siblings []agentinstallv1.Agent
	version := ""
	if c != nil {
		if siblings, err = record.Agents(ctx, r.Client, c.CD); err != nil {
			return ctrl.Result{}, err
		}
		if is, err := record.ImageSet(ctx, r.Client, c); err == nil {
			version = record.OpenshiftVersion(is.Spec.ReleaseImage)
		}
	}
	// The status first: the metadata patch after it records the
	// registration applied to the state just written, so that a failure
	// in between applies it again (to the state it made: the same result)
	// rather than never.
	run, err := reconciler.Start(r.Client, a, reconciler.StatusFirst())
	if err != nil {
		return ctrl.Result{}, err
	}
	from, registration := a.Status.DebugInfo.State, record.PendingRegistration(a)
	defer func() {
		fresh := r.freshTransition(ctx, a, from)
		if registration != "" {
			record.SetRegistrationApplied(a, registration)
		}
		run.End(ctx, &reterr)
		if run.Patched() && fresh {
			r.recordTransition(a, from)
		}
		res, reterr = reconciler.RequeueOnConflict(res, reterr)
	}()
	now := r.Clock.Now()
	// Look again when the host's install or stage would time out or its
	// agent would be disconnected, whichever comes first; else in a
	// minute.
	var next []time.Duration
	if left, ok := r.compute(a, c, siblings, version, now); ok {
		next = append(next, left+time.Second)
	}
	if ie := infraEnvUID(a); r.EventsURL != nil && ie != "" {
		a.Status.DebugInfo.EventsURL = r.EventsURL("infra_env_id", ie, "host_id", a.Name)
	}
	record.MirrorAnnotations(a)
	if last := r.silentSince(a); !last.IsZero() {
		if wait := r.disconnectedAfter() - now.Sub(last); wait > 0 {
			next = append(next, wait+time.Second)
		}
	}
	res.RequeueAfter = time.Minute
	if len(next) > 0 {
		res.RequeueAfter = slices.Min(next)
	}
	return res, nil
}

// freshTransition tells whether this reconcile moves the host out of
// state from, as the API has it: a reconcile that started from a cached
// copy older than the last write makes again (writing the same value) a
// transition already made, whose Event is recorded once.
func (r *Reconciler) freshTransition(ctx context.Context, a *agentinstallv1.Agent, from string) bool {
	if from == a.Status.DebugInfo.State || r.Recorder == nil {
		return false
	}
	if r.Writes.Current(a) {
		// This process wrote it last, and the copy has that write: its
		// state, which only this reconciler writes, is the API's.
		return true
	}
	reader := r.live
	if reader == nil {
		reader = r.Client
	}
	cur := &agentinstallv1.Agent{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
		return true
	}
	return cur.Status.DebugInfo.State == from
}

// recordTransition records the host's state change, once written.
func (r *Reconciler) recordTransition(a *agentinstallv1.Agent, from string) {
	to := a.Status.DebugInfo.State
	typ := corev1.EventTypeNormal
	if to == hoststate.StatusError || to == hoststate.StatusDisconnected || to == hoststate.StatusDisconnectedUnbound {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(a, typ, "HostStatusUpdated", "Host %s: updated status from %s to %s (%s)",
		record.Hostname(a), orNone(from), to, a.Status.DebugInfo.StateInfo)
}

// compute sets a's status from its record and cluster. It returns how long
// the host has until its install or current stage times out; ok is false
// when no timeout applies.
func (r *Reconciler) compute(a *agentinstallv1.Agent, c *record.Cluster, siblings []agentinstallv1.Agent, version string, now time.Time) (left time.Duration, ok bool) {
	st := &a.Status
	registered := record.PendingRegistration(a) != ""
	if registered {
		// The agent registered (again) since: its host starts over, or,
		// restarted mid-install, is in error. That state is written as it
		// is, as upstream's registration does; the next reconcile (this
		// write wakes it) refreshes it.
		st.DebugInfo.State, st.DebugInfo.StateInfo = record.State(a), ""
	}
	hasInventory := st.Inventory.ReportTime != nil
	if c != nil {
		st.Role = agentinstallv1.HostRole(suggestRole(a, c, siblings))
	} else if a.Spec.Role == agentinstallv1.HostRoleAutoAssign || a.Spec.Role == "" {
		st.Role = ""
	}
	st.InstallationDiskID = installationDisk(a)
	specErr := specError(a)
	connected := now.Sub(r.silentSince(a)) < r.disconnectedAfter()
	in := validations.HostInput{
		Role: record.Role(a), Hostname: record.Hostname(a), Connected: connected, Bound: c != nil,
		InstallationDisk: diskPath(a, st.InstallationDiskID), DomainsResolved: record.DomainsResolved(a),
	}
	if hasInventory {
		in.Inventory = record.InventoryFromCR(&st.Inventory)
	}
	if st.NtpSources != nil {
		in.NTPSources = []assistedapi.NTPSource{}
		for _, s := range st.NtpSources {
			in.NTPSources = append(in.NTPSources, assistedapi.NTPSource{SourceName: s.SourceName, SourceState: s.SourceState})
		}
	}
	for _, d := range st.Inventory.Disks {
		if d.Path == in.InstallationDisk && d.IoPerf.SyncDurationMilliseconds > 0 {
			v := d.IoPerf.SyncDurationMilliseconds
			in.DiskSpeedMs = &v
		}
	}
	facts := hoststate.Facts{Status: st.DebugInfo.State, StatusInfo: st.DebugInfo.StateInfo, Bound: c != nil, Connected: connected, HasInventory: hasInventory,
		Approved: a.Spec.Approved, Stage: assistedapi.HostStage(st.Progress.CurrentStage),
		ProgressInfo: st.Progress.ProgressInfo, Day2Host: st.Kind == assistedapi.KindAddToExistingClusterHost}
	if c != nil {
		in.SNO, in.OpenshiftVersion, in.Day2 = c.SNO(), version, c.State() == "adding-hosts"
		in.ClusterName, in.BaseDomain = c.CD.Spec.ClusterName, c.CD.Spec.BaseDomain
		in.UserManagedNetworking = c.ACI.Spec.Networking.UserManagedNetworking != nil && *c.ACI.Spec.Networking.UserManagedNetworking
		in.MachineNetworks = record.MachineNetworks(c, siblings)
		for _, s := range siblings {
			if s.Name != a.Name {
				in.OtherHostnames = append(in.OtherHostnames, record.Hostname(&s))
			}
		}
		facts.ClusterStatus = c.State()
		facts.Day2 = c.State() == "adding-hosts"
	}
	v := validations.Host(in)
	facts.Validations = v
	sno := c != nil && c.SNO()
	since := record.StateSince(a)
	if since.IsZero() {
		since = now // not recorded yet (an Agent of an older hub): from now on
	}
	cl := installClock(a, sno, facts.ClusterStatus, st.DebugInfo.State, since)
	if at, limit, timed := r.Timeouts.Deadline(cl); timed && !registered {
		facts.StageTimeout = limit
		facts.StageTimedOut, _ = hoststate.TimedOut(at, now)
	}
	if hoststate.Held(cl) && now.Sub(cl.HeldSince) >= time.Minute {
		// Recorded once a minute (as upstream refreshes the stage's
		// time): the count starts from about when the hold ends.
		record.SetStageHeld(a, now)
	}
	if d := diskOf(a, st.InstallationDiskID); d != nil {
		facts.InstallationDisk = "(" + d.Name + ", " + d.ID + ")"
	}
	state, info := st.DebugInfo.State, st.DebugInfo.StateInfo
	if !registered {
		state, info = hoststate.Refresh(facts)
	}
	if state != st.DebugInfo.State || record.StateSince(a).IsZero() || registered {
		since = now
		record.SetStateSince(a, now)
	}
	st.DebugInfo.State, st.DebugInfo.StateInfo = state, info
	if at, _, timed := r.Timeouts.Deadline(installClock(a, sno, facts.ClusterStatus, state, since)); timed {
		var over bool
		if over, left = hoststate.TimedOut(at, now); !over {
			ok = true
		}
	}
	if specErr == nil {
		specErr = unbindError(a, c, state)
	}
	setKind(st, c, state)
	st.ValidationsInfo = v.Status()
	conds := []conditions.Cond{conditions.AgentSpecSynced(specErr, specErr != nil)}
	conds = append(conds, conditions.Agent(state, info, a.Spec.Approved, st.Progress.CurrentStage, v)...)
	conditions.Set(&st.Conditions, now, conds...)
	return left, ok
}

// installClock is what the timeouts of a's install count from, the host
// being in state since since.
func installClock(a *agentinstallv1.Agent, sno bool, clusterStatus, state string, since time.Time) hoststate.Clock {
	p := a.Status.Progress
	cl := hoststate.Clock{Status: state, Stage: assistedapi.HostStage(p.CurrentStage), SNO: sno, ClusterStatus: clusterStatus, StatusSince: since}
	switch {
	case p.StageUpdateTime != nil:
		cl.StageSince = p.StageUpdateTime.Time
	case p.StageStartTime != nil:
		cl.StageSince = p.StageStartTime.Time
	}
	cl.HeldSince = record.StageHeld(a)
	return cl
}

// unbindError is the service's refusal of a day-1 host unbound in the
// middle of its install (admission refuses the change first; this is what
// is left when it got through, e.g. without the webhook).
func unbindError(a *agentinstallv1.Agent, c *record.Cluster, state string) error {
	if c != nil || hoststate.IsUnbound(state) || state == "" {
		return nil
	}
	if _, ok := hoststate.Unbind(state, a.Status.Kind == assistedapi.KindAddToExistingClusterHost); ok {
		return nil
	}
	return fmt.Errorf("cancelling non-day-2 host [%s] in the middle of installation is not allowed", a.Name)
}

// setKind sets status.kind while the host is not installing: a host bound
// to an installed cluster is added to it (AddToExistingClusterHost).
func setKind(st *agentinstallv1.AgentStatus, c *record.Cluster, state string) {
	if !hoststate.BeforeInstallation(state) && st.Kind != "" {
		return
	}
	st.Kind = assistedapi.KindHost
	if c != nil && c.State() == "adding-hosts" {
		st.Kind = assistedapi.KindAddToExistingClusterHost
	}
}

// specError is what keeps an Agent's spec from being applied: a
// clusterDeploymentName in another namespace (the Agent is then unbound),
// installer arguments or Ignition overrides that do not parse.
func specError(a *agentinstallv1.Agent) error {
	if err := record.AgentClusterReference(a); err != nil {
		return err
	}
	if _, err := record.InstallerArgs(a); err != nil {
		return err
	}
	if o := a.Spec.IgnitionConfigOverrides; o != "" {
		if _, rpt, err := v3_4.ParseCompatibleVersion([]byte(o)); err != nil || rpt.IsFatal() {
			return fmt.Errorf("ignitionConfigOverrides: invalid Ignition config: %v %s", err, rpt.String())
		}
	}
	return nil
}

// suggestRole is status.role: the effective role of a host whose spec
// says auto-assign — master while the cluster needs masters (hosts in
// name order), else worker.
func suggestRole(a *agentinstallv1.Agent, c *record.Cluster, siblings []agentinstallv1.Agent) string {
	if r := a.Spec.Role; r != "" && r != agentinstallv1.HostRoleAutoAssign {
		return string(r)
	}
	if a.Status.DebugInfo.State != "" && a.Status.Progress.CurrentStage != "" && a.Status.Role != "" {
		return string(a.Status.Role) // fixed once installing
	}
	masters := c.ACI.Spec.ProvisionRequirements.ControlPlaneAgents
	sort.Slice(siblings, func(i, j int) bool { return siblings[i].Name < siblings[j].Name })
	for _, s := range siblings {
		if s.Spec.Role == agentinstallv1.HostRoleMaster {
			masters--
		}
	}
	for _, s := range siblings {
		if s.Spec.Role != "" && s.Spec.Role != agentinstallv1.HostRoleAutoAssign {
			continue
		}
		if s.Name == a.Name {
			if masters > 0 {
				return string(agentinstallv1.HostRoleMaster)
			}
			return string(agentinstallv1.HostRoleWorker)
		}
		masters--
	}
	return string(agentinstallv1.HostRoleWorker)
}

// installationDisk is the disk the host installs to: the spec's, else the
// first eligible one.
func installationDisk(a *agentinstallv1.Agent) string {
	for _, d := range a.Status.Inventory.Disks {
		if (a.Spec.InstallationDiskID != "" && d.ID == a.Spec.InstallationDiskID) ||
			(a.Spec.InstallationDiskPath != "" && d.Path == a.Spec.InstallationDiskPath) {
			return d.ID
		}
	}
	if a.Spec.InstallationDiskID != "" || a.Spec.InstallationDiskPath != "" {
		return ""
	}
	for _, d := range a.Status.Inventory.Disks {
		if d.InstallationEligibility.Eligible {
			return d.ID
		}
	}
	return ""
}

// diskOf is a's disk of ID id, nil if none.
func diskOf(a *agentinstallv1.Agent, id string) *agentinstallv1.HostDisk {
	for i := range a.Status.Inventory.Disks {
		if d := &a.Status.Inventory.Disks[i]; d.ID == id {
			return d
		}
	}
	return nil
}

func diskPath(a *agentinstallv1.Agent, id string) string {
	for _, d := range a.Status.Inventory.Disks {
		if d.ID == id {
			return d.Path
		}
	}
	return ""
}

// infraEnvUID is the UID of the InfraEnv that owns a, "" if none does.
func infraEnvUID(a *agentinstallv1.Agent) string {
	for _, o := range a.OwnerReferences {
		if o.Kind == "InfraEnv" {
			return string(o.UID)
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

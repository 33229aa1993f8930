// Package bmac is the BareMetalHost ⇄ Agent controller: it drives the
// agent-based install from BareMetalHosts (zero-touch provisioning). A
// host labelled infraenvs.agent-install.openshift.io=<InfraEnv> boots that
// InfraEnv's discovery ISO through the host engine; the Agent that
// registers with the host's boot MAC is paired with it, approved, and
// takes its role, hostname and other settings from the host's
// bmac.agent-install.openshift.io annotations; the Agent's inventory
// becomes the host's hardware details; once the Agent's install has
// rebooted it into its disk the host is detached from the engine.
package bmac

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// BareMetalHost annotations and labels of the integration, as upstream.
const (
	annotationPrefix = "bmac.agent-install.openshift.io/"
	// RoleAnnotation and the others below are copied to the Agent's spec.
	RoleAnnotation                    = annotationPrefix + "role"
	HostnameAnnotation                = annotationPrefix + "hostname"
	MachineConfigPoolAnnotation       = annotationPrefix + "machine-config-pool"
	InstallerArgsAnnotation           = annotationPrefix + "installer-args"
	IgnitionConfigOverridesAnnotation = annotationPrefix + "ignition-config-overrides"
	// ClusterReferenceAnnotation binds the Agent to "<namespace>/<name>"
	// (late binding), a ClusterDeployment of the host's own namespace;
	// "" unbinds it. ClusterReferenceCondition reports it.
	ClusterReferenceAnnotation = annotationPrefix + "cluster-reference"
	// AgentLabelPrefix: bmac.agent-install.openshift.io.agent-label.<key>
	// sets the Agent's label <key>; labels are added, never removed.
	AgentLabelPrefix = "bmac.agent-install.openshift.io.agent-label."
	// BMHLabel on an Agent names its BareMetalHost.
	BMHLabel = "agent-install.openshift.io/bmh"
	// RemoveAgentAndNodeOnDeleteAnnotation "true": deleting the host
	// deletes its Agent and, once installed, its Node in the installed
	// cluster (Finalizer holds the host meanwhile).
	RemoveAgentAndNodeOnDeleteAnnotation = annotationPrefix + "remove-agent-and-node-on-delete"
	// Finalizer is BMAC's on hosts it has to clean up after.
	Finalizer = "bmac.agent-install.openshift.io/deprovision"
	// detachedBy is the value of the detached annotation BMAC sets.
	detachedBy = "assisted-service-controller"
)

// ClusterReferenceCondition is the BareMetalHost condition BMAC owns: set
// while the host has the cluster-reference annotation, True when BMAC
// applies it to the host's Agent, False with what keeps it from doing so.
const ClusterReferenceCondition = "AgentClusterReferenceAccepted"

// Reasons of ClusterReferenceCondition.
const (
	// ReasonClusterReferenceAccepted: the annotation binds (or unbinds)
	// the host's Agent.
	ReasonClusterReferenceAccepted = "Accepted"
	// ReasonCrossNamespaceReference: the annotation names a
	// ClusterDeployment of another namespace; the Agent is not bound.
	ReasonCrossNamespaceReference = "CrossNamespaceReference"
	// ReasonInvalidClusterReference: the annotation is not
	// <namespace>/<name>, or the host's InfraEnv binds its Agents itself.
	ReasonInvalidClusterReference = "InvalidClusterReference"
)

// Reconciler pairs BareMetalHosts with Agents.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// ConvergedFlow: hosts boot their PreprovisioningImage (the InfraEnv's
	// image, which the preprovisioningimage controller gives them), are
	// inspected by the host engine, and install through the custom deploy
	// start_assisted_install; they stay managed by the engine. Otherwise
	// they boot the InfraEnv's ISO as a live-iso image, uninspected, and
	// are detached once installed.
	ConvergedFlow bool
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=infraenvs,verbs=get;list;watch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&metal3v1.BareMetalHost{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&agentinstallv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.hostsOfAgent)).
		Watches(&agentinstallv1.InfraEnv{}, handler.EnqueueRequestsFromMapFunc(r.hostsOfInfraEnv)).
		WithOptions(opts).
		Named("bmac").
		Complete(r)
}

// hostsOfAgent wakes the labelled hosts of the Agent's namespace whose boot
// MAC is one of the Agent's.
func (r *Reconciler) hostsOfAgent(ctx context.Context, o client.Object) []ctrl.Request {
	a := o.(*agentinstallv1.Agent)
	hosts := &metal3v1.BareMetalHostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(a.Namespace), client.HasLabels{agentinstallv1.InfraEnvNameLabel}); err != nil {
		return nil
	}
	var reqs []ctrl.Request
	for i := range hosts.Items {
		if hasMAC(a, hosts.Items[i].Spec.BootMACAddress) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
		}
	}
	return reqs
}

// hostsOfInfraEnv wakes the hosts labelled for the InfraEnv (its ISO URL
// is theirs).
func (r *Reconciler) hostsOfInfraEnv(ctx context.Context, o client.Object) []ctrl.Request {
	hosts := &metal3v1.BareMetalHostList{}
	if err := r.Client.List(ctx, hosts, client.InNamespace(o.GetNamespace()), client.MatchingLabels{agentinstallv1.InfraEnvNameLabel: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(hosts.Items))
	for i := range hosts.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
	}
	return reqs
}

func hasMAC(a *agentinstallv1.Agent, mac string) bool {
	if mac == "" {
		return false
	}
	for _, nic := range a.Status.Inventory.Interfaces {
		if strings.EqualFold(nic.MacAddress, mac) {
			return true
		}
	}
	return false
}

// Reconcile brings a labelled host and its Agent together. End writes
// what it changed on the host: its finalizer, annotations and spec, and
// its ClusterReferenceCondition (merged with the host engine's
// conditions); the Events of those changes follow the write.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	host := &metal3v1.BareMetalHost{}
	if err := r.Client.Get(ctx, req.NamespacedName, host); err != nil || !shard.Owns(r.WatchFilterValue, host) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	run, err := reconciler.Start(r.Client, host, reconciler.OwnedConditions(ClusterReferenceCondition))
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{host: host}
	defer func() {
		run.End(ctx, &reterr)
		res, reterr = reconciler.RequeueOnConflict(res, reterr)
		if run.Patched() {
			for _, e := range s.events {
				r.event(host, e.typ, e.reason, e.msg)
			}
		}
	}()
	if host.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, host)
	}
	ieName := host.Labels[agentinstallv1.InfraEnvNameLabel]
	ensureFinalizer(host, ieName != "" && host.Annotations[RemoveAgentAndNodeOnDeleteAnnotation] == "true")
	if ieName == "" {
		return ctrl.Result{}, nil
	}
	ie := &agentinstallv1.InfraEnv{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: host.Namespace, Name: ieName}, ie); err != nil {
		if apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Info("Waiting for the host's InfraEnv", "infraEnv", ieName)
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	s.ie = ie
	return reconciler.Phases(ctx, s, r.reportClusterReference, r.pairAgent, r.reconcileHost)
}

// scope is one reconcile of a host: the host, as End will write it, its
// InfraEnv and its Agent, and the Events of the host's changes, recorded
// once they are written.
type scope struct {
	host   *metal3v1.BareMetalHost
	ie     *agentinstallv1.InfraEnv
	agent  *agentinstallv1.Agent
	events []event
}

type event struct{ typ, reason, msg string }

func (s *scope) event(typ, reason, msg string) {
	s.events = append(s.events, event{typ, reason, msg})
}

// pairAgent finds the host's Agent (s.agent), which it approves and gives
// the host's settings, among those reporting the host's boot MAC.
func (r *Reconciler) pairAgent(ctx context.Context, s *scope) (ctrl.Result, error) {
	agents, err := r.agentsOf(ctx, s.host)
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.ConvergedFlow {
		agents = r.proven(s.host, agents)
	}
	switch len(agents) {
	case 0:
	case 1:
		s.agent = &agents[0]
		// A lost conflict on the Agent is a requeue (End's), besides the
		// Agent's change waking the host.
		return ctrl.Result{}, r.reconcileAgent(ctx, s.host, s.ie, s.agent)
	default:
		// More than one Agent reports the host's boot MAC: all but one
		// are machines that are not this host (or say they have its MAC).
		// None is approved for it until a person deletes the others.
		s.agent, err = r.refuseClaims(ctx, s.host, agents)
	}
	return ctrl.Result{}, err
}

// agentsOf are the Agents of the host's namespace that report its boot MAC.
func (r *Reconciler) agentsOf(ctx context.Context, host *metal3v1.BareMetalHost) ([]agentinstallv1.Agent, error) {
	agents := &agentinstallv1.AgentList{}
	if err := r.Client.List(ctx, agents, append(shard.ListOptions(r.WatchFilterValue), client.InNamespace(host.Namespace))...); err != nil {
		return nil, err
	}
	var out []agentinstallv1.Agent
	for i := range agents.Items {
		if hasMAC(&agents.Items[i], host.Spec.BootMACAddress) {
			out = append(out, agents.Items[i])
		}
	}
	return out, nil
}

// agentOf is the Agent paired with the host: among those reporting its
// boot MAC, the one BMAC labelled with the host, else the only one; nil
// when none or several unlabelled ones do.
func (r *Reconciler) agentOf(ctx context.Context, host *metal3v1.BareMetalHost) (*agentinstallv1.Agent, error) {
	agents, err := r.agentsOf(ctx, host)
	if err != nil {
		return nil, err
	}
	for i := range agents {
		if agents[i].Labels[BMHLabel] == host.Name {
			return &agents[i], nil
		}
	}
	if len(agents) == 1 {
		return &agents[0], nil
	}
	return nil, nil
}

// ReasonUnprovenAgent is the reason of the Warning Event on a host when,
// in the converged flow, an Agent reports the host's boot MAC but did not
// register with the host's proof.
const ReasonUnprovenAgent = "UnprovenAgent"

// proven keeps, of the Agents that report the host's boot MAC, those whose
// registration carried the host's proof (the converged flow: the host
// engine started their agent for this host); the others are named in an
// Event and never paired.
func (r *Reconciler) proven(host *metal3v1.BareMetalHost, agents []agentinstallv1.Agent) []agentinstallv1.Agent {
	want := host.Name + "/" + string(host.UID)
	out := agents[:0]
	for i := range agents {
		if agents[i].Annotations[agentinstallv1.AgentRegisteredForHostAnnotation] == want {
			out = append(out, agents[i])
			continue
		}
		r.event(host, corev1.EventTypeWarning, ReasonUnprovenAgent, fmt.Sprintf("Agent %s reports the boot MAC %s of BareMetalHost %s, "+
			"but the host engine did not start its agent for this host: it is not paired or approved. Delete it if it is no machine of yours",
			agents[i].Name, host.Spec.BootMACAddress, host.Name))
	}
	return out
}

// ReasonAmbiguousAgents is the reason of the Warning Events on a host and
// its claimants when more than one Agent reports the host's boot MAC.
const ReasonAmbiguousAgents = "AmbiguousAgents"

// refuseClaims handles Agents that all report the host's boot MAC: none
// is approved for the host, and the approval BMAC gave one of them (it
// labelled it with the host) is withdrawn while its install has not
// started. It returns the Agent BMAC paired with the host before, if any,
// for the host's image to stay as it is.
func (r *Reconciler) refuseClaims(ctx context.Context, host *metal3v1.BareMetalHost, agents []agentinstallv1.Agent) (*agentinstallv1.Agent, error) {
	names := make([]string, 0, len(agents))
	for i := range agents {
		names = append(names, agents[i].Name)
	}
	slices.Sort(names) // the cache lists in no set order
	msg := fmt.Sprintf("Agents %s all report the boot MAC %s of BareMetalHost %s: none is approved for it. Delete the Agents of machines that are not this host",
		strings.Join(names, ", "), host.Spec.BootMACAddress, host.Name)
	var paired *agentinstallv1.Agent
	for i := range agents {
		a := &agents[i]
		if a.Labels[BMHLabel] != host.Name {
			continue
		}
		paired = a
		if !a.Spec.Approved || !preInstall(a) {
			continue
		}
		a.Spec.Approved = false
		if err := r.Client.Update(ctx, a); err != nil {
			return nil, fmt.Errorf("withdrawing the approval of Agent %s: %w", a.Name, err)
		}
		r.event(a, corev1.EventTypeWarning, ReasonAmbiguousAgents, msg+": approval withdrawn")
	}
	r.event(host, corev1.EventTypeWarning, ReasonAmbiguousAgents, msg)
	return paired, nil
}

// reconcileHost: the host boots the InfraEnv's ISO (live-iso, no
// inspection or cleaning by the engine) until its Agent is there; it gets
// the Agent's inventory as hardware details; once the install rebooted it
// into its disk, the engine lets go of it.
func (r *Reconciler) reconcileHost(_ context.Context, s *scope) (ctrl.Result, error) {
	host, ie, agent := s.host, s.ie, s.agent
	if host.Annotations == nil {
		host.Annotations = map[string]string{}
	}
	if _, detached := host.Annotations[metal3v1.DetachedAnnotation]; detached {
		return ctrl.Result{}, nil
	}
	if r.ConvergedFlow {
		convergedHost(host)
		return ctrl.Result{}, nil
	}
	host.Annotations[metal3v1.InspectAnnotation] = metal3v1.InspectAnnotationValueDisabled
	host.Spec.AutomatedCleaningMode = metal3v1.CleaningModeDisabled
	// The ISO URL is given while no Agent registered from it: a renewed URL
	// of the same image must not make the engine boot the host again.
	if url := ie.Status.ISODownloadURL; url != "" && (agent == nil || host.Spec.Image == nil) {
		format := "live-iso"
		host.Spec.Image = &metal3v1.Image{URL: url, DiskFormat: &format}
		host.Spec.Online = true
	}
	if agent == nil {
		return ctrl.Result{}, nil
	}
	if hw := hardwareDetails(agent); hw != "" && host.Annotations[metal3v1.HardwareDetailsAnnotation] != hw {
		host.Annotations[metal3v1.HardwareDetailsAnnotation] = hw
	}
	if installedToDisk(agent) {
		host.Annotations[metal3v1.DetachedAnnotation] = detachedBy
		s.event(corev1.EventTypeNormal, "Detached", fmt.Sprintf("Agent %s rebooted into its installed disk: the host engine no longer manages the host", agent.Name))
	}
	return ctrl.Result{}, nil
}

// convergedHost: the host's install is the custom deploy
// start_assisted_install, which the agent of its PreprovisioningImage runs:
// it starts the discovery agent, whose Agent is then paired and approved
// as in the other flow. It is set at once, as upstream does: the Agent only
// registers once the custom deploy has started it.
func convergedHost(host *metal3v1.BareMetalHost) {
	if host.Spec.CustomDeploy == nil || host.Spec.CustomDeploy.Method != deployapi.MethodStartAssistedInstall {
		host.Spec.CustomDeploy = &metal3v1.CustomDeploy{Method: deployapi.MethodStartAssistedInstall}
		host.Spec.Online = true
	}
}

// installedToDisk: the Agent's install wrote its disk and rebooted it.
func installedToDisk(a *agentinstallv1.Agent) bool {
	switch assistedapi.HostStage(a.Status.Progress.CurrentStage) {
	case assistedapi.StageRebooting, assistedapi.StageConfiguring, assistedapi.StageJoined, assistedapi.StageDone, assistedapi.StageFailed:
		return true
	}
	return a.Status.DebugInfo.State == hoststate.StatusInstalled || a.Status.DebugInfo.State == hoststate.StatusAddedToExistingCluster
}

// hardwareDetails is the Agent's inventory as metal3 hardware details JSON.
func hardwareDetails(a *agentinstallv1.Agent) string {
	inv := a.Status.Inventory
	if len(inv.Interfaces) == 0 && len(inv.Disks) == 0 {
		return ""
	}
	hw := metal3v1.HardwareDetails{
		SystemVendor: metal3v1.HardwareSystemVendor{Manufacturer: inv.SystemVendor.Manufacturer, ProductName: inv.SystemVendor.ProductName,
			SerialNumber: inv.SystemVendor.SerialNumber},
		RAMMebibytes: int(inv.Memory.PhysicalBytes >> 20),
		CPU: metal3v1.CPU{Arch: inv.Cpu.Architecture, Model: inv.Cpu.ModelName, ClockMegahertz: metal3v1.ClockSpeed(inv.Cpu.ClockMegahertz),
			Flags: inv.Cpu.Flags, Count: int(inv.Cpu.Count)},
		Hostname: inv.Hostname,
	}
	for _, nic := range inv.Interfaces {
		ip := ""
		if len(nic.IPV4Addresses) > 0 {
			ip, _, _ = strings.Cut(nic.IPV4Addresses[0], "/")
		} else if len(nic.IPV6Addresses) > 0 {
			ip, _, _ = strings.Cut(nic.IPV6Addresses[0], "/")
		}
		hw.NIC = append(hw.NIC, metal3v1.NIC{Name: nic.Name, Model: strings.TrimSpace(nic.Vendor + " " + nic.Product), MAC: nic.MacAddress, IP: ip,
			SpeedGbps: int(nic.SpeedMbps / 1000)})
	}
	for _, d := range inv.Disks {
		st := metal3v1.Storage{Name: d.Path, Rotational: d.DriveType == "HDD", Type: metal3v1.DiskType(d.DriveType),
			SizeBytes: metal3v1.Capacity(d.SizeBytes), Vendor: d.Vendor, Model: d.Model, SerialNumber: d.Serial, WWN: d.Wwn, HCTL: d.Hctl}
		if d.ByPath != "" {
			st.AlternateNames = append(st.AlternateNames, d.ByPath)
		}
		hw.Storage = append(hw.Storage, st)
	}
	data, err := json.Marshal(hw)
	if err != nil {
		return ""
	}
	return string(data)
}

// reconcileAgent: the Agent is labelled with its host, approved, and
// takes the host's annotations while its install has not started.
func (r *Reconciler) reconcileAgent(ctx context.Context, host *metal3v1.BareMetalHost, ie *agentinstallv1.InfraEnv, a *agentinstallv1.Agent) error {
	before := a.DeepCopy()
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	a.Labels[BMHLabel] = host.Name
	for k, v := range host.Annotations {
		if key, ok := strings.CutPrefix(k, AgentLabelPrefix); ok && key != "" {
			a.Labels[key] = v
		}
	}
	a.Spec.Approved = true
	if preInstall(a) {
		ann := host.Annotations
		if v, ok := ann[RoleAnnotation]; ok {
			a.Spec.Role = agentinstallv1.HostRole(v)
		}
		if v, ok := ann[HostnameAnnotation]; ok {
			a.Spec.Hostname = v
		}
		if v, ok := ann[MachineConfigPoolAnnotation]; ok {
			a.Spec.MachineConfigPool = v
		}
		if v, ok := ann[InstallerArgsAnnotation]; ok {
			a.Spec.InstallerArgs = v
		}
		if v, ok := ann[IgnitionConfigOverridesAnnotation]; ok {
			a.Spec.IgnitionConfigOverrides = v
		}
		if id := diskFromHints(a, host.Spec.RootDeviceHints); id != "" {
			a.Spec.InstallationDiskID = id
		}
		if v, ok := ann[ClusterReferenceAnnotation]; ok {
			// A refusal is reported by reportClusterReference.
			_ = bindFromAnnotation(a, ie, v)
		}
	}
	if reflect.DeepEqual(before.Labels, a.Labels) && reflect.DeepEqual(before.Spec, a.Spec) {
		return nil
	}
	// An Update: the Agent's spec may change only while its install has
	// not started, which its status as read tells; a conflict is a requeue.
	if err := r.Client.Update(ctx, a); err != nil {
		return err
	}
	if !before.Spec.Approved {
		r.event(host, corev1.EventTypeNormal, "AgentApproved", fmt.Sprintf("Agent %s registered with the host's boot MAC %s: approved", a.Name, host.Spec.BootMACAddress))
	}
	return nil
}

// preInstall: the Agent's install has not started, so its spec may change.
func preInstall(a *agentinstallv1.Agent) bool {
	switch a.Status.DebugInfo.State {
	case hoststate.StatusPreparingForInstallation, hoststate.StatusPreparingSuccessful, hoststate.StatusInstalling,
		hoststate.StatusInstallingInProgress, hoststate.StatusInstallingPendingUserAction, hoststate.StatusInstalled,
		hoststate.StatusAddedToExistingCluster, hoststate.StatusError:
		return false
	}
	return true
}

// bindFromAnnotation applies the cluster-reference annotation to an Agent
// of the host's namespace: "ns/name" binds it, "" unbinds it;
// annotationReference says what is refused.
func bindFromAnnotation(a *agentinstallv1.Agent, ie *agentinstallv1.InfraEnv, ref string) error {
	name, err := annotationReference(a.Namespace, ie, ref)
	if err != nil {
		return err
	}
	if name == "" {
		a.Spec.ClusterDeploymentName = nil
		return nil
	}
	a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Namespace: a.Namespace, Name: name}
	return nil
}

// annotationReference checks the cluster-reference annotation ref of a
// host of namespace ns labelled for ie, and returns the name of the
// ClusterDeployment it binds the host's Agent to ("" unbinds it). It
// refuses a value that is not <namespace>/<name>, a namespace other than
// ns (rec.ErrCrossNamespace), and any value when ie has a clusterRef
// (the InfraEnv binds its Agents itself).
func annotationReference(ns string, ie *agentinstallv1.InfraEnv, ref string) (string, error) {
	if ie.Spec.ClusterRef != nil {
		return "", fmt.Errorf("annotation %s is set, but InfraEnv %s has a clusterRef: its Agents are bound to %s/%s", ClusterReferenceAnnotation, ie.Name,
			ie.Spec.ClusterRef.Namespace, ie.Spec.ClusterRef.Name)
	}
	if ref == "" {
		return "", nil
	}
	refNS, name, ok := strings.Cut(ref, "/")
	if !ok || refNS == "" || name == "" {
		return "", fmt.Errorf("annotation %s: %q is not <namespace>/<name>", ClusterReferenceAnnotation, ref)
	}
	if err := rec.LocalReference("BareMetalHost", "metadata.annotations["+ClusterReferenceAnnotation+"]", ns, refNS); err != nil {
		return "", err
	}
	return name, nil
}

// clusterReferenceCondition is the host's ClusterReferenceCondition; nil
// without the annotation.
func clusterReferenceCondition(host *metal3v1.BareMetalHost, ie *agentinstallv1.InfraEnv) *metav1.Condition {
	ref, ok := host.Annotations[ClusterReferenceAnnotation]
	if !ok {
		return nil
	}
	c := &metav1.Condition{Type: ClusterReferenceCondition, Status: metav1.ConditionTrue, Reason: ReasonClusterReferenceAccepted,
		ObservedGeneration: host.Generation}
	_, err := annotationReference(host.Namespace, ie, ref)
	switch {
	case err == nil && ref == "":
		c.Message = "The host's Agent is unbound"
	case err == nil:
		c.Message = "The host's Agent is bound to ClusterDeployment " + ref
	case errors.Is(err, rec.ErrCrossNamespace):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonCrossNamespaceReference, err.Error()+": the host's Agent is not bound to it"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalidClusterReference, err.Error()
	}
	return c
}

// reportClusterReference sets or removes the host's
// ClusterReferenceCondition; End writes it, merged with the host engine's
// conditions, and then records a Warning Event when it turned False.
func (r *Reconciler) reportClusterReference(_ context.Context, s *scope) (ctrl.Result, error) {
	host := s.host
	c := clusterReferenceCondition(host, s.ie)
	if c == nil {
		meta.RemoveStatusCondition(&host.Status.Conditions, ClusterReferenceCondition)
		return ctrl.Result{}, nil
	}
	if meta.SetStatusCondition(&host.Status.Conditions, *c) && c.Status == metav1.ConditionFalse {
		s.event(corev1.EventTypeWarning, c.Reason, c.Message)
	}
	return ctrl.Result{}, nil
}

// diskFromHints is the inventory disk the host's root device hints name
// (deviceName: a path or a /dev/disk/by-path name; serialNumber; wwn).
func diskFromHints(a *agentinstallv1.Agent, h *metal3v1.RootDeviceHints) string {
	if h == nil {
		return ""
	}
	for _, d := range a.Status.Inventory.Disks {
		switch {
		case h.DeviceName != "" && h.DeviceName != d.Path && h.DeviceName != d.ByPath:
		case h.SerialNumber != "" && h.SerialNumber != d.Serial:
		case h.WWN != "" && h.WWN != d.Wwn:
		case h.DeviceName == "" && h.SerialNumber == "" && h.WWN == "":
		default:
			return d.ID
		}
	}
	return ""
}

func (r *Reconciler) event(o client.Object, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Event(o, typ, reason, msg)
	}
}

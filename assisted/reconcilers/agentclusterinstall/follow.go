package agentclusterinstall

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/installstate"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/internal/kubeconfig"
)

// SpokeView is what the hub reads of an installed cluster.
type SpokeView struct {
	// Nodes are the cluster's Nodes by name: Ready or not.
	Nodes map[string]bool
	// Available is ClusterVersion version's Available condition.
	Available bool
}

// SpokeReader reads an installed cluster with its admin kubeconfig.
type SpokeReader interface {
	Read(ctx context.Context, data []byte) (*SpokeView, error)
}

// spokeScheme holds the types the hub reads in an installed cluster.
var spokeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(configv1.AddToScheme(s))
	return s
}()

// KubeconfigSpoke reads the cluster's API.
type KubeconfigSpoke struct{}

// Read implements SpokeReader.
func (KubeconfigSpoke) Read(ctx context.Context, data []byte) (*SpokeView, error) {
	c, err := rec.SpokeClient(data, spokeScheme)
	if err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, err
	}
	v := &SpokeView{Nodes: map[string]bool{}}
	for _, n := range nodes.Items {
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		v.Nodes[n.Name] = ready
	}
	cv := &configv1.ClusterVersion{}
	if err := c.Get(ctx, types.NamespacedName{Name: "version"}, cv); err == nil {
		for _, cond := range cv.Status.Conditions {
			if cond.Type == "Available" && cond.Status == "True" {
				v.Available = true
			}
		}
	}
	return v, nil
}

// spoke reads the installed cluster, once per reconcile.
func (in *install) spoke(ctx context.Context) (*SpokeView, error) {
	if in.spokeTried {
		return in.spokeView, in.spokeErr
	}
	in.spokeTried = true
	kc, err := in.adminKubeconfig(ctx)
	if err != nil {
		in.spokeErr = err
		return nil, err
	}
	in.spokeView, in.spokeErr = in.r.Spoke.Read(ctx, kc)
	return in.spokeView, in.spokeErr
}

// adminKubeconfig is the installed cluster's admin kubeconfig: from the
// install state, or for an imported cluster from the Secret its
// ClusterDeployment's clusterMetadata names.
func (in *install) adminKubeconfig(ctx context.Context) ([]byte, error) {
	if in.kubeconfig != nil {
		return in.kubeconfig, nil
	}
	kc, err := rec.AdminKubeconfig(ctx, in.r.Client, in.c.CD, in.state)
	in.kubeconfig = kc
	return kc, err
}

// importedKubeconfig refuses an imported cluster's admin kubeconfig that
// asks for more than inline credentials (package kubeconfig): a tenant
// wrote it, and the hub reads the cluster with it for the hosts it adds.
// SpecSynced reports the refusal; the day-2 steps that would use it fail
// with it, having run nothing. A Secret not there yet is not reported here.
func (in *install) importedKubeconfig(ctx context.Context) error {
	if !rec.Imported(in.c.CD, in.state) {
		return nil
	}
	kc, err := in.adminKubeconfig(ctx)
	if err != nil {
		return nil
	}
	if _, err := kubeconfig.Load(kc); err != nil {
		return fmt.Errorf("clusterMetadata.adminKubeconfigSecretRef: Secret %s: %w", in.c.CD.Spec.ClusterMetadata.AdminKubeconfigSecretRef.Name, err)
	}
	return nil
}

// silentInstallers tells whether a host of the install has been silent
// for silentInstaller before it said Rebooting.
func (in *install) silentInstallers() bool {
	for i := range in.agents {
		if in.silentInstaller(&in.agents[i]) {
			return true
		}
	}
	return false
}

// silentInstaller tells whether a is a host of the install (preparing or
// installing) the hub last heard of before it said Rebooting, silent
// since: its last stage silentInstaller ago or more, and its last contact
// longer ago than the service lets it get stale (ContactEvery) plus
// silentInstaller, so that a host still calling is not taken for silent.
func (in *install) silentInstaller(a *agentinstallv1.Agent) bool {
	switch a.Status.DebugInfo.State {
	case hoststate.StatusPreparingForInstallation, hoststate.StatusPreparingSuccessful,
		hoststate.StatusInstalling, hoststate.StatusInstallingInProgress:
	default:
		return false
	}
	switch assistedapi.HostStage(a.Status.Progress.CurrentStage) {
	case "", assistedapi.StageStartingInstallation, assistedapi.StageInstalling, assistedapi.StageWaitingForBootkube,
		assistedapi.StageWritingImageToDisk, assistedapi.StageCopyingRegistryData, assistedapi.StageWaitingForControlPlane,
		assistedapi.StageWaitingForController:
	default:
		return false
	}
	if at := a.Status.Progress.StageUpdateTime; at != nil && in.now.Sub(at.Time) < silentInstaller {
		return false
	}
	contactEvery := in.r.ContactEvery
	if contactEvery <= 0 {
		contactEvery = time.Minute
	}
	last := rec.LastContact(a)
	return !last.IsZero() && in.now.Sub(last) >= contactEvery+silentInstaller
}

// spokeInstalled tells whether the installed cluster reports its version
// Available, once every host's Node is Ready there (stage Done): the
// cluster is never installed with a host still Joined.
func (in *install) spokeInstalled(ctx context.Context) bool {
	if in.state == nil || len(in.agents) == 0 {
		return false
	}
	for i := range in.agents {
		if assistedapi.HostStage(in.agents[i].Status.Progress.CurrentStage) != assistedapi.StageDone {
			return false
		}
	}
	v, err := in.spoke(ctx)
	return err == nil && v.Available
}

// silentInstaller is how long a host of the install, last heard of
// before it said Rebooting, has been silent before the hub looks for its
// Node. A host whose later reports (the stages up to Rebooting, or the
// install step's reply) reached a hub whose state was since restored from
// an older backup, or were lost, is never heard of again: it booted its
// disk, and its Node in the installed cluster is the proof. The hub may
// hold it at any point of its install, from preparing (the backup was
// taken before its install step) to its last stage before Rebooting. A
// host still installing that is merely slow to report has no Node there,
// and only costs a read of the installed cluster.
const silentInstaller = 20 * time.Second

// follow moves the hosts that rebooted into the installed cluster through
// Joined (their Node registered) and Done (it is Ready), as upstream's
// in-cluster controller reports them; and the hosts last heard of before
// they said Rebooting, silent since (silentInstaller), whose Node is
// there.
func (in *install) follow(ctx context.Context) error {
	anyJoining, silent := in.day2Joining(), in.silentInstallers()
	if !anyJoining && !silent {
		return nil
	}
	v, err := in.spoke(ctx)
	if err != nil {
		if !anyJoining {
			// No host said it rebooted: the cluster's API is not expected
			// to answer yet.
			return nil
		}
		return err
	}
	now := metav1.NewTime(in.now)
	for i := range in.agents {
		a := &in.agents[i]
		cur := assistedapi.HostStage(a.Status.Progress.CurrentStage)
		if cur == assistedapi.StageDone || cur == assistedapi.StageFailed {
			continue
		}
		if !joining(a) && !in.silentInstaller(a) {
			continue
		}
		ready, ok := v.Nodes[rec.Hostname(a)]
		if !ok {
			continue
		}
		next := assistedapi.StageJoined
		if ready {
			next = assistedapi.StageDone
		}
		if next == cur {
			continue
		}
		role, bootstrap, sno := rec.Role(a), a.Status.Bootstrap, in.c.SNO()
		if hoststate.StageAllowed(role, bootstrap, sno, cur, next) != nil {
			continue
		}
		before := a.DeepCopy()
		if rec.SetStage(a, next, "", hoststate.Stages(role, bootstrap, sno), hoststate.Percentage(role, bootstrap, sno, next), now) {
			if err := in.r.Client.Status().Patch(ctx, a, client.MergeFrom(before)); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
	}
	return nil
}

// complete does what Hive does once the install completed: the admin
// Secrets, clusterMetadata on both objects, installed: true.
func (in *install) complete(ctx context.Context) error {
	c := in.c
	if in.state == nil {
		return nil
	}
	st, err := installstate.FromData(in.state.Data)
	if err != nil {
		return err
	}
	kcName, pwName := c.CD.Name+rec.AdminKubeconfigSuffix, c.CD.Name+rec.AdminPasswordSuffix
	for name, data := range map[string]map[string][]byte{
		kcName: {"kubeconfig": st.AdminKubeconfig},
		pwName: {"username": []byte("kubeadmin"), "password": []byte(st.KubeadminPassword)},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.CD.Namespace, Name: name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, in.r.Client, s, func() error {
			s.Data = data
			rec.Cached(s)
			return controllerutil.SetOwnerReference(c.CD, s, in.r.Client.Scheme())
		}); err != nil {
			return err
		}
	}
	md := &hivev1.ClusterMetadata{ClusterID: string(c.ACI.UID), InfraID: string(c.ACI.UID),
		AdminKubeconfigSecretRef: corev1.LocalObjectReference{Name: kcName}, AdminPasswordSecretRef: &corev1.LocalObjectReference{Name: pwName}}
	if c.ACI.Spec.ClusterMetadata == nil {
		c.ACI.Spec.ClusterMetadata = md // End writes it
	}
	if c.CD.Spec.ClusterMetadata == nil || !c.CD.Spec.Installed {
		before := c.CD.DeepCopy()
		c.CD.Spec.ClusterMetadata = c.ACI.Spec.ClusterMetadata
		c.CD.Spec.Installed = true
		if err := in.r.Client.Patch(ctx, c.CD, client.MergeFrom(before)); err != nil {
			return err
		}
		in.r.Recorder.Event(c.CD, corev1.EventTypeNormal, "Installed", "The cluster is installed; its admin kubeconfig is in Secret "+kcName)
	}
	return nil
}

// mirrorConditions copies the install's conditions to the
// ClusterDeployment as ClusterInstall<Type>, as Hive does.
func (r *Reconciler) mirrorConditions(ctx context.Context, cd *hivev1.ClusterDeployment, conds []hivev1.ClusterInstallCondition) error {
	var out []hivev1.ClusterDeploymentCondition
	for _, c := range cd.Status.Conditions {
		if len(c.Type) < len("ClusterInstall") || c.Type[:len("ClusterInstall")] != "ClusterInstall" {
			out = append(out, c)
		}
	}
	for _, c := range conds {
		out = append(out, hivev1.ClusterDeploymentCondition{Type: "ClusterInstall" + c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastProbeTime: c.LastProbeTime, LastTransitionTime: c.LastTransitionTime})
	}
	if conditionsEqual(cd.Status.Conditions, out) {
		return nil
	}
	before := cd.DeepCopy()
	cd.Status.Conditions = out
	return r.Client.Status().Patch(ctx, cd, client.MergeFrom(before))
}

func conditionsEqual(a, b []hivev1.ClusterDeploymentCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason || a[i].Message != b[i].Message {
			return false
		}
	}
	return true
}

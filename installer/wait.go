package installer

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/kubeconfig"
)

// Milestone is what `wait-for` waits for.
type Milestone string

// Milestones.
const (
	// BootstrapComplete: the control plane is initialized and the
	// bootstrap node removed.
	BootstrapComplete Milestone = "bootstrap-complete"
	// InstallComplete: ClusterVersion is Available and every Machine runs a Node.
	InstallComplete Milestone = "install-complete"
)

// watcher prints progress lines when they change and problems once.
type watcher struct {
	c       client.Client
	ns      string
	name    string
	out     io.Writer
	start   time.Time
	printed map[string]string
	seen    map[string]bool
	// workload is the installed cluster's client, once it has one.
	workload client.Client
}

// Wait reports progress of cluster <name> in namespace <name> until the
// milestone is reached or ctx ends. Problems (a failing condition) are
// printed as soon as they appear.
func Wait(ctx context.Context, c client.Client, name string, m Milestone, out io.Writer) error {
	w := &watcher{c: c, ns: name, name: name, out: out, start: time.Now(), printed: map[string]string{}, seen: map[string]bool{}}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		done, err := w.poll(ctx, m)
		if err != nil {
			return err
		}
		if done {
			w.say("Reached %s after %s", m, time.Since(w.start).Round(time.Second))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; `metalshift gather` collects the hub's objects, events and logs", m, ctx.Err())
		case <-t.C:
		}
	}
}

func (w *watcher) say(format string, args ...any) {
	fmt.Fprintf(w.out, "%6s  %s\n", time.Since(w.start).Round(time.Second), fmt.Sprintf(format, args...))
}

// report prints line under key when it differs from the last one.
func (w *watcher) report(key, line string) {
	if w.printed[key] == line {
		return
	}
	w.printed[key] = line
	w.say("%s", line)
}

// problem prints a problem once.
func (w *watcher) problem(obj, msg string) {
	k := obj + "\x00" + msg
	if w.seen[k] {
		return
	}
	w.seen[k] = true
	w.say("WARNING %s: %s", obj, msg)
}

func (w *watcher) poll(ctx context.Context, m Milestone) (bool, error) {
	key := client.ObjectKey{Namespace: w.ns, Name: w.name}
	cluster := &clusterv1.Cluster{}
	if err := w.c.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("cluster %s not found on the hub: run `metalshift create cluster`", w.name)
		}
		w.report("hub", "Hub: "+err.Error())
		return false, nil
	}
	w.report("cluster", fmt.Sprintf("Cluster %s: %s", w.name, orDash(cluster.Status.Phase)))
	mc := &infrav1.MetalCluster{}
	if err := w.c.Get(ctx, key, mc); err == nil {
		w.report("metalcluster", fmt.Sprintf("MetalCluster %s: provisioned=%t, API endpoint %s:%d", w.name,
			ptr.Deref(mc.Status.Initialization.Provisioned, false), mc.Spec.ControlPlaneEndpoint.Host, mc.Spec.ControlPlaneEndpoint.Port))
	}
	cp := &controlplanev1.OpenShiftControlPlane{}
	if err := w.c.Get(ctx, key, cp); err != nil {
		return false, nil
	}
	w.report("bootstrap", "Bootstrap node: "+orDash(cp.Status.BootstrapPhase))
	for _, t := range []string{controlplanev1.BootstrapReadyCondition, controlplanev1.ControlPlaneInitializedCondition,
		controlplanev1.BootstrapRemovedCondition, controlplanev1.AvailableCondition} {
		if c := meta.FindStatusCondition(cp.Status.Conditions, t); c != nil {
			w.report("cp/"+t, fmt.Sprintf("Control plane %s=%s: %s", t, c.Status, c.Message))
			if c.Reason == controlplanev1.BootstrapNotServingReason || c.Reason == controlplanev1.InstallStateMissingReason {
				w.problem("OpenShiftControlPlane "+cp.Name, c.Message)
			}
		}
	}
	machines, running := w.machines(ctx)
	w.problems(ctx)
	bootstrapDone := ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false) && cp.Status.BootstrapPhase == controlplanev1.BootstrapPhaseRemoved
	if m == BootstrapComplete {
		return bootstrapDone, nil
	}
	available := w.clusterVersion(ctx)
	want := cp.DesiredReplicas()
	mds := &clusterv1.MachineDeploymentList{}
	if err := w.c.List(ctx, mds, client.InNamespace(w.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: w.name}); err == nil {
		for _, md := range mds.Items {
			want += int(ptr.Deref(md.Spec.Replicas, 0))
		}
	}
	return bootstrapDone && available && running == want && machines == want, nil
}

// machines reports the Machines' phases; it returns how many there are
// (bootstrap excluded) and how many run a Node.
func (w *watcher) machines(ctx context.Context) (int, int) {
	list := &clusterv1.MachineList{}
	if err := w.c.List(ctx, list, client.InNamespace(w.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: w.name}); err != nil {
		return 0, 0
	}
	phases := map[string]int{}
	n, running := 0, 0
	for _, m := range list.Items {
		phase := m.Status.Phase
		if phase == "" {
			phase = "new" // not reconciled by Cluster API yet
		}
		phases[phase]++
		if _, ok := m.Labels[controlplanev1.BootstrapMachineLabel]; ok {
			continue
		}
		n++
		if m.Status.GetTypedPhase() == clusterv1.MachinePhaseRunning && m.Status.NodeRef.IsDefined() {
			running++
		}
	}
	var parts []string
	for p, k := range phases {
		parts = append(parts, fmt.Sprintf("%d %s", k, p))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		parts = []string{"none yet"}
	}
	w.report("machines", "Machines: "+strings.Join(parts, ", "))
	return n, running
}

// problems prints failing conditions of bootstrap configs, infrastructure
// machines and hosts.
func (w *watcher) problems(ctx context.Context) {
	cfgs := &bootstrapv1.OpenShiftConfigList{}
	if w.c.List(ctx, cfgs, client.InNamespace(w.ns)) == nil {
		for _, c := range cfgs.Items {
			if cond := meta.FindStatusCondition(c.Status.Conditions, bootstrapv1.DataSecretAvailableCondition); cond != nil && strings.HasPrefix(cond.Reason, "Invalid") {
				w.problem("OpenShiftConfig "+c.Name, cond.Message)
			}
		}
	}
	mms := &infrav1.MetalMachineList{}
	if w.c.List(ctx, mms, client.InNamespace(w.ns)) == nil {
		for _, mm := range mms.Items {
			if cond := meta.FindStatusCondition(mm.Status.Conditions, infrav1.HostClaimedCondition); cond != nil && cond.Status == metav1.ConditionFalse {
				w.problem("MetalMachine "+mm.Name, cond.Message)
			}
		}
	}
	hosts := &metal3v1.BareMetalHostList{}
	if w.c.List(ctx, hosts, client.InNamespace(w.ns)) == nil {
		for _, h := range hosts.Items {
			if h.Status.ErrorMessage != "" {
				w.problem("BareMetalHost "+h.Name, string(h.Status.ErrorType)+": "+h.Status.ErrorMessage)
			}
		}
	}
}

// clusterVersion reports the installed cluster's ClusterVersion; true once Available.
func (w *watcher) clusterVersion(ctx context.Context) bool {
	if w.workload == nil {
		s := &corev1.Secret{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name + "-kubeconfig"}, s); err != nil {
			return false
		}
		// Written by whoever may write Secrets in the namespace: inline
		// credentials only.
		cfg, err := kubeconfig.Load(s.Data["value"])
		if err != nil {
			return false
		}
		cfg.Timeout = 5 * time.Second
		if w.workload, err = client.New(cfg, client.Options{Scheme: w.c.Scheme()}); err != nil {
			return false
		}
	}
	cv := &configv1.ClusterVersion{}
	if err := w.workload.Get(ctx, client.ObjectKey{Name: "version"}, cv); err != nil {
		return false
	}
	if p := configv1.FindCondition(cv.Status.Conditions, configv1.OperatorProgressing); p != nil {
		w.report("clusterversion", "ClusterVersion: "+p.Message)
	}
	cos := &configv1.ClusterOperatorList{}
	if err := w.workload.List(ctx, cos); err == nil {
		avail := 0
		for _, co := range cos.Items {
			if a := configv1.FindCondition(co.Status.Conditions, configv1.OperatorAvailable); a != nil && a.Status == metav1.ConditionTrue {
				avail++
			}
		}
		w.report("clusteroperators", fmt.Sprintf("ClusterOperators: %d of %d Available", avail, len(cos.Items)))
	}
	a := configv1.FindCondition(cv.Status.Conditions, configv1.OperatorAvailable)
	return a != nil && a.Status == metav1.ConditionTrue
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package console

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/api/assistedcommon"
)

// clusterAgent creates an Agent of cluster cd in ns at stage, with a
// failing validation when failing is set.
func clusterAgent(g Gomega, ns, name, cd, stage, failing string) *agentinstallv1.Agent {
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.AgentSpec{Hostname: name + ".example.com", Role: agentinstallv1.HostRoleMaster, Approved: true,
			ClusterDeploymentName: &agentinstallv1.ClusterReference{Namespace: ns, Name: cd}}}
	g.Expect(env.Client.Create(context.Background(), a)).To(Succeed())
	setStage(g, a, stage, 30)
	if failing != "" {
		g.Eventually(func() error {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
				return err
			}
			a.Status.ValidationsInfo = assistedcommon.ValidationsStatus{"hardware": {
				{ID: "has-memory-for-role", Status: "failure", Message: failing}, {ID: "has-cpu-cores-for-role", Status: "success", Message: "enough cores"}}}
			return env.Client.Status().Update(context.Background(), a)
		}).Should(Succeed())
	}
	return a
}

// setStage writes an Agent's installation stage, as the agent service does.
func setStage(g Gomega, a *agentinstallv1.Agent, stage string, percent int64) {
	g.Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		a.Status.DebugInfo.State = "installing-in-progress"
		a.Status.Progress.CurrentStage, a.Status.Progress.InstallationPercentage = stage, percent
		return env.Client.Status().Update(context.Background(), a)
	}).Should(Succeed())
}

// hostEvent records an Event about o, as a controller's recorder does.
func hostEvent(g Gomega, o client.Object, kind, reason, message string) {
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), GenerateName: o.GetName() + "."},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()},
		Type:           corev1.EventTypeNormal, Reason: reason, Message: message,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1, Source: corev1.EventSource{Component: "test"}}
	g.Expect(env.Client.Create(context.Background(), e)).To(Succeed())
}

// TestBrowserCluster opens a cluster's page from the fleet: its Agents
// follow their stages live, failing validations and Events are shown,
// the timeline has a bar per host; the admin downloads the kubeconfig,
// a tenant who may not read Secrets is told so. It opens a Cluster API
// cluster's page and the InfraEnvs page.
func TestBrowserCluster(t *testing.T) {
	g := NewWithT(t)
	hs, _ := startConsole(t, false, nil)
	ctx := newChrome(t)
	dir := artifacts(t)
	ctxBG := context.Background()

	team := namespace(t, "team")
	sno := newACI(g, team, "sno")
	setProgress(g, sno, "installing", 40)
	g.Eventually(func() error {
		if err := env.Client.Get(ctxBG, client.ObjectKeyFromObject(sno), sno); err != nil {
			return err
		}
		sno.Status.ValidationsInfo = assistedcommon.ValidationsStatus{"network": {
			{ID: "api-vips-defined", Status: "failure", Message: "API virtual IPs are undefined"}}}
		return env.Client.Status().Update(ctxBG, sno)
	}).Should(Succeed())
	m0 := clusterAgent(g, team, "master-0", "sno", "Installing", "")
	m1 := clusterAgent(g, team, "master-1", "sno", "Writing image to disk", "Insufficient memory: 8 GiB of 16 GiB")
	other := clusterAgent(g, team, "elsewhere", "other-cluster", "Installing", "")
	hostEvent(g, m0, "Agent", "HostStatusUpdated", "Host master-0: updated status from known to installing")
	hostEvent(g, sno, "AgentClusterInstall", "InstallStarted", "The installation has started")
	hostEvent(g, other, "Agent", "HostStatusUpdated", "Host elsewhere: of another cluster")
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: sno}]\n"
	g.Expect(env.Client.Create(ctxBG, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "sno-admin-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": []byte(kubeconfig)}})).To(Succeed())

	admin := serviceAccountToken(t, team, "admin", everything, true)
	// The tenant reads the fleet's kinds in its namespace, not its Secrets.
	tenant := serviceAccountToken(t, team, "tenant", []rbacv1.PolicyRule{{APIGroups: []string{"", "agent-install.openshift.io", "extensions.hive.openshift.io", "hive.openshift.io"},
		Resources: []string{"agents", "agentclusterinstalls", "clusterdeployments", "events"}, Verbs: []string{"get", "list", "watch"}}}, false)

	aciRow := row("AgentClusterInstall", team, "sno")
	m0Row, m1Row := "#hosts "+row("Agent", team, m0.Name), "#hosts "+row("Agent", team, m1.Name)
	g.Expect(chromedp.Do(ctx,
		signIn(hs.URL, admin),
		chromedp.Click(in(aciRow, ".col-name a")),
		chromedp.WaitVisible(m0Row),
		chromedp.WaitVisible(m1Row),
		until(`document.querySelectorAll("#events tbody tr").length === 2`),
		screenshot(dir, "cluster"),
	)).To(Succeed())
	g.Expect(text(g, ctx, "h1")).To(Equal("Cluster " + team + "/sno"))
	g.Expect(text(g, ctx, "#install-validations")).To(Equal("api-vips-defined: API virtual IPs are undefined"))
	g.Expect(text(g, ctx, in(m1Row, ".col-validations"))).To(Equal("has-memory-for-role: Insufficient memory: 8 GiB of 16 GiB"))
	g.Expect(text(g, ctx, in(m0Row, ".col-validations"))).To(BeEmpty())
	g.Expect(text(g, ctx, in(m1Row, ".col-stage"))).To(Equal("Writing image to disk"))
	g.Expect(text(g, ctx, "#events")).To(ContainSubstring("The installation has started"))
	g.Expect(text(g, ctx, "#events")).NotTo(ContainSubstring("of another cluster"))
	hosts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#timeline g.host")].map((g) => g.dataset.key)`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hosts).To(ConsistOf("Agent/"+team+"/master-0", "Agent/"+team+"/master-1"), "a bar per host of the cluster")
	g.Expect(chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline g.host .stage-done").length`))).To(BeNumerically(">", 0))

	// A host moves on: its row and its bar follow, without a reload.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`))
	g.Expect(err).NotTo(HaveOccurred())
	setStage(g, m0, "Rebooting", 70)
	hostEvent(g, m0, "Agent", "HostStatusUpdated", "Host master-0: rebooting")
	g.Expect(chromedp.Do(ctx,
		until(`document.querySelector('`+string(m0Row)+` .col-stage')?.textContent === "Rebooting"`),
		until(`document.querySelector('#timeline g.host[data-key="Agent/`+team+`/master-0"]')?.dataset.stage === "Rebooting"`),
		until(`document.querySelectorAll("#events tbody tr").length === 3`),
		until(`window.notReloaded === true`),
		screenshot(dir, "cluster-live"),
	)).To(Succeed())
	g.Expect(text(g, ctx, in(m0Row, ".col-progress"))).To(Equal("70%"))

	// The admin downloads the kubeconfig.
	downloads := t.TempDir()
	g.Expect(chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
				Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
			return err
		}),
		chromedp.Click(chromedp.ID("kubeconfig")),
	)).To(Succeed())
	g.Eventually(func() (string, error) {
		b, err := os.ReadFile(filepath.Join(downloads, "sno-kubeconfig"))
		return string(b), err
	}).WithTimeout(30 * time.Second).Should(Equal(kubeconfig))
	g.Expect(text(g, ctx, "#kubeconfig-error")).To(BeEmpty())

	// The tenant may not read Secrets: the page says so.
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("token")),
		signIn(hs.URL, tenant),
		chromedp.Navigate(hs.URL+"/clusters/agent/"+team+"/sno"),
		chromedp.WaitVisible(m0Row),
		chromedp.Click(chromedp.ID("kubeconfig")),
		until(`document.getElementById("kubeconfig-error").textContent !== ""`),
		screenshot(dir, "cluster-tenant-kubeconfig"),
	)).To(Succeed())
	refusal := text(g, ctx, "#kubeconfig-error")
	g.Expect(refusal).To(ContainSubstring("You may not read the kubeconfig"))
	g.Expect(refusal).To(ContainSubstring("(403)"))
	g.Expect(refusal).NotTo(ContainSubstring("clusters: [{name: sno}]"))
}

// TestBrowserClusterAPIAndInfraEnvs opens a Cluster API cluster's page,
// whose Machine follows its phase live, and the InfraEnvs page, with the
// discovery image's URLs, the Agents registered and the NMStateConfigs
// selected.
func TestBrowserClusterAPIAndInfraEnvs(t *testing.T) {
	g := NewWithT(t)
	hs, _ := startConsole(t, false, nil)
	ctx := newChrome(t)
	dir := artifacts(t)
	ctxBG := context.Background()
	team := namespace(t, "team")

	capi := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "capi-1"}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "MetalCluster", Name: "capi-1"}}}
	g.Expect(env.Client.Create(ctxBG, capi)).To(Succeed())
	capi.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
	capi.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneAvailableCondition, Status: metav1.ConditionFalse,
		Reason: "NotAvailable", Message: "0 of 1 ready", LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(ctxBG, capi)).To(Succeed())
	machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "capi-1-cp-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "capi-1"}},
		Spec: clusterv1.MachineSpec{ClusterName: "capi-1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "MetalMachine", Name: "m0"}}}
	g.Expect(env.Client.Create(ctxBG, machine)).To(Succeed())
	setPhase := func(phase string) {
		g.Eventually(func() error {
			if err := env.Client.Get(ctxBG, client.ObjectKeyFromObject(machine), machine); err != nil {
				return err
			}
			machine.Status.Phase = phase
			return env.Client.Status().Update(ctxBG, machine)
		}).Should(Succeed())
	}
	setPhase(string(clusterv1.MachinePhaseProvisioning))
	hostEvent(g, machine, "Machine", "SuccessfulCreate", "Created the MetalMachine")

	pullSecret := &corev1.LocalObjectReference{Name: "pull"}
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "lab"}, Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: pullSecret,
		NMStateConfigLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "lab"}}}}
	g.Expect(env.Client.Create(ctxBG, ie)).To(Succeed())
	iso := "https://images.example.com/lab/discovery.iso"
	ie.Status.ISODownloadURL, ie.Status.BootArtifacts.IpxeScriptURL = iso, "https://images.example.com/lab/ipxe"
	g.Expect(env.Client.Status().Update(ctxBG, ie)).To(Succeed())
	for name, label := range map[string]string{"host-a": "lab", "host-b": "prod"} {
		g.Expect(env.Client.Create(ctxBG, &agentinstallv1.NMStateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name, Labels: map[string]string{"env": label}}})).To(Succeed())
	}
	registered := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "reg-1", Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: "lab"}}}
	g.Expect(env.Client.Create(ctxBG, registered)).To(Succeed())

	admin := serviceAccountToken(t, team, "admin", everything, true)
	machineRow := `#hosts ` + row("Machine", team, machine.Name)
	g.Expect(chromedp.Do(ctx,
		signIn(hs.URL, admin),
		chromedp.Click(in(row("Cluster", team, capi.Name), ".col-name a")),
		chromedp.WaitVisible(machineRow),
		until(`document.querySelectorAll("#events tbody tr").length === 1`),
	)).To(Succeed())
	g.Expect(text(g, ctx, "#conditions")).To(ContainSubstring("ControlPlaneAvailable=False (NotAvailable): 0 of 1 ready"))
	g.Expect(text(g, ctx, in(machineRow, ".col-state"))).To(Equal("Provisioning"))
	setPhase(string(clusterv1.MachinePhaseRunning))
	g.Expect(chromedp.Do(ctx,
		until(`document.querySelector('`+string(machineRow)+` .col-state')?.textContent === "Running"`),
		screenshot(dir, "cluster-api"),
	)).To(Succeed())

	ieRow := row("InfraEnv", team, "lab")
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/infraenvs"),
		chromedp.WaitVisible(ieRow),
		until(`document.querySelector('`+string(ieRow)+` .col-agents')?.textContent === "1"`),
		screenshot(dir, "infraenvs"),
	)).To(Succeed())
	g.Expect(text(g, ctx, in(ieRow, ".col-iso a"))).To(Equal(iso))
	g.Expect(text(g, ctx, in(ieRow, ".col-ipxe"))).To(Equal("https://images.example.com/lab/ipxe"))
	g.Expect(text(g, ctx, in(ieRow, ".col-nmstate"))).To(Equal("host-a"))
	g.Expect(chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rows tbody tr").length`))).To(Equal(1), "Agents and NMStateConfigs are counted, not listed")
}

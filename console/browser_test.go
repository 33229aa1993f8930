package console

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// chromium is Debian's chromium, which hack/deps.sh installs for the tests.
const chromium = "/usr/bin/chromium"

// newChrome starts a headless chromium for the test and returns its
// context; every action of the test runs in it, bounded by two minutes so
// that a broken test fails rather than hangs.
func newChrome(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (Debian's chromium; hack/deps.sh test installs it): %v", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 900), chromedp.UserDataDir(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return browser
}

// artifacts is where the test's screenshots go: $METALSHIFT_ARTIFACTS/console
// when set, else a directory of the test's temp dir.
func artifacts(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "artifacts")
	if a := os.Getenv("METALSHIFT_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot writes the page as name.png.
func screenshot(dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, t)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o600)
	})
}

// row selects the table row of kind/ns/name.
func row(kind, ns, name string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`tr[data-key="%s/%s/%s"]`, kind, ns, name))
}

// in selects what sel selects inside row r.
func in(r chromedp.CSS, sel string) chromedp.CSS { return r + " " + chromedp.CSS(sel) }

// until waits for a JavaScript condition of the page.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return err
	})
}

// text reads the text of sel.
func text(g Gomega, ctx context.Context, sel chromedp.CSS) string {
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	g.Expect(err).NotTo(HaveOccurred())
	return strings.TrimSpace(s)
}

func signIn(url, token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(url+"/signin"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("user")),
	)
}

// TestBrowser drives the console in chromium, against the API server: an
// admin signs in with a token, sees both paths' clusters, sees an
// install's progress change without a reload and approves an Agent; a
// tenant sees only the namespaces it may read and is refused an approval
// where it may only look.
func TestBrowser(t *testing.T) {
	g := NewWithT(t)
	// The browser stops before the server (cleanups run last first), which
	// waits for the browser's event streams.
	hs, _ := startConsole(t, false, nil)
	ctx := newChrome(t)
	dir := artifacts(t)
	t.Logf("Screenshots in %s", dir)

	team, viewed, hidden := namespace(t, "team"), namespace(t, "viewed"), namespace(t, "hidden")
	sno := newACI(g, team, "sno")
	setProgress(g, sno, "installing", 10)
	hiddenACI := newACI(g, hidden, "secret-cluster")
	capi := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "capi-1"}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "MetalCluster", Name: "capi-1"}}}
	g.Expect(env.Client.Create(context.Background(), capi)).To(Succeed())
	capi.Status.Phase = string(clusterv1.ClusterPhaseProvisioning)
	g.Expect(env.Client.Status().Update(context.Background(), capi)).To(Succeed())
	ownAgent, viewedAgent := newAgent(g, team, "agent-1"), newAgent(g, viewed, "agent-2")
	host := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "host-0"},
		Spec: metal3v1.BareMetalHostSpec{BootMACAddress: "52:54:00:00:00:01", Online: true,
			BMC: metal3v1.BMCDetails{Address: "redfish-virtualmedia://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
	g.Expect(env.Client.Create(context.Background(), host)).To(Succeed())

	admin := serviceAccountToken(t, team, "admin", everything, true)
	tenant := serviceAccountToken(t, team, "tenant", everything, false)
	viewer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: viewed, Name: "viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}}
	g.Expect(env.Client.Create(context.Background(), viewer)).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: viewed, Name: "tenant-views"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: team, Name: "tenant"}}})).To(Succeed())

	aciRow := row("AgentClusterInstall", team, "sno")
	t.Logf("step 1 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		signIn(hs.URL, admin),
		chromedp.WaitVisible(aciRow),
		chromedp.WaitVisible(row("AgentClusterInstall", hidden, hiddenACI.Name)),
		chromedp.WaitVisible(row("Cluster", team, capi.Name)),
		screenshot(dir, "fleet"),
	)).To(Succeed())
	g.Expect(text(g, ctx, "#user")).To(Equal("system:serviceaccount:" + team + ":admin"))
	g.Expect(text(g, ctx, in(aciRow, ".col-progress"))).To(Equal("10%"))
	g.Expect(text(g, ctx, in(aciRow, ".col-path"))).To(Equal("agent"))
	g.Expect(text(g, ctx, in(row("Cluster", team, capi.Name), ".col-path"))).To(Equal("cluster-api"))
	g.Expect(text(g, ctx, in(row("Cluster", team, capi.Name), ".col-progress"))).To(Equal("20%"))

	// The install moves on: the row follows, and the page was not reloaded
	// (a mark left on the window is still there).
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`))
	g.Expect(err).NotTo(HaveOccurred())
	setProgress(g, sno, "finalizing", 55)
	t.Logf("step 2 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		until(`document.querySelector('`+string(aciRow)+` progress')?.value === 55`),
		until(`window.notReloaded === true`),
		screenshot(dir, "fleet-live"),
	)).To(Succeed())
	g.Expect(text(g, ctx, in(aciRow, ".col-state"))).To(Equal("finalizing"))

	// Filter by state: only the finalizing install stays.
	t.Logf("step 3 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("state"), "final"),
		chromedp.WaitNotPresent(row("Cluster", team, capi.Name)),
		chromedp.WaitVisible(aciRow),
	)).To(Succeed())

	// Approve an Agent from the hosts page.
	agentRow := row("Agent", team, ownAgent.Name)
	t.Logf("step 4 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/hosts"),
		chromedp.WaitVisible(row("BareMetalHost", team, host.Name)),
		screenshot(dir, "hosts-waiting"),
		// Only the Agents waiting for approval: the host goes.
		chromedp.Click(chromedp.ID("waiting")),
		chromedp.WaitNotPresent(row("BareMetalHost", team, host.Name)),
		chromedp.Click(in(agentRow, "button.approve")),
		chromedp.WaitNotPresent(agentRow), // approved: no longer waiting
		chromedp.Click(chromedp.ID("waiting")),
		until(`document.querySelector('`+string(agentRow)+` .col-approval')?.textContent === "approved"`),
		screenshot(dir, "hosts"),
	)).To(Succeed())
	g.Eventually(approved(ownAgent)).Should(BeTrue())

	// Edit its role and host name: a bad host name is refused with the
	// reason, and nothing is written; a good one is written as the user
	// and the row follows.
	t.Logf("step 4b %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(in(agentRow, "button.edit")),
		chromedp.WaitVisible(chromedp.ID("edit-agent")),
		chromedp.SetValue(chromedp.ID("edit-role"), "worker"),
		chromedp.SetValue(chromedp.ID("edit-hostname"), "Not_A_Host"),
		chromedp.Click(chromedp.ID("edit-save")),
		chromedp.WaitVisible(chromedp.ID("edit-error")),
	)).To(Succeed())
	g.Expect(text(g, ctx, "#edit-error")).To(And(ContainSubstring("(400)"), ContainSubstring(`Host name "Not_A_Host"`)))
	g.Expect(agentSpec(g, ownAgent).Role).NotTo(Equal(agentinstallv1.HostRoleWorker), "a refused edit writes nothing")
	g.Expect(chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("edit-hostname"), "edited-host"),
		chromedp.Click(chromedp.ID("edit-save")),
		chromedp.WaitNotVisible(chromedp.ID("edit-agent")),
		until(`document.querySelector('`+string(agentRow)+` .col-detail')?.textContent.includes("host edited-host")`),
		until(`document.querySelector('`+string(agentRow)+` .col-detail')?.textContent.includes("role worker")`),
		screenshot(dir, "hosts-edited"),
	)).To(Succeed())
	spec := agentSpec(g, ownAgent)
	g.Expect([]any{spec.Role, spec.Hostname}).To(Equal([]any{agentinstallv1.HostRoleWorker, "edited-host"}))

	// The tenant: sign out, sign in with its token. All namespaces it may
	// not list; its own it may.
	t.Logf("step 5 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("token")),
		signIn(hs.URL, tenant),
		chromedp.WaitVisible(chromedp.ID("denied-AgentClusterInstall")),
		screenshot(dir, "tenant-all-namespaces"),
	)).To(Succeed())
	g.Expect(text(g, ctx, "#denied-AgentClusterInstall")).To(ContainSubstring("You may not list AgentClusterInstalls in all namespaces"))
	t.Logf("step 6 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("namespace"), team+"\n"),
		chromedp.WaitVisible(aciRow),
		chromedp.WaitNotPresent(chromedp.ID("denied-AgentClusterInstall")),
		screenshot(dir, "tenant-fleet"),
	)).To(Succeed())

	// Where it may only look, the Approve button is there but the API
	// server refuses the approval, and the page says so.
	t.Logf("step 7 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/hosts"),
		chromedp.WaitVisible(chromedp.ID("namespace")),
		chromedp.SendKeys(chromedp.ID("namespace"), viewed+"\n"),
		chromedp.Click(in(row("Agent", viewed, viewedAgent.Name), "button.approve")),
		chromedp.WaitVisible(chromedp.ID("approve-error")),
		screenshot(dir, "tenant-refused"),
	)).To(Succeed())
	refusal := text(g, ctx, "#approve-error")
	g.Expect(refusal).To(ContainSubstring("(403)"))
	g.Expect(refusal).To(ContainSubstring("forbidden"))
	g.Expect(approved(viewedAgent)()).To(BeFalse())

	// A namespace it may not read at all shows why, and nothing of it.
	t.Logf("step 8 %s", time.Now().Format("15:04:05.000"))
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(hs.URL+"/fleet"),
		chromedp.WaitVisible(chromedp.ID("namespace")),
		chromedp.SendKeys(chromedp.ID("namespace"), hidden+"\n"),
		chromedp.WaitVisible(chromedp.ID("denied-AgentClusterInstall")),
	)).To(Succeed())
	g.Expect(text(g, ctx, "#denied-AgentClusterInstall")).To(ContainSubstring("in namespace " + hidden))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rows tbody tr").length`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shown).To(BeZero())
}

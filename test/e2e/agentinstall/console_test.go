package agentinstall

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/metalshift/metalshift/console"
)

// chromium is Debian's, which hack/deps.sh installs for the tests.
const chromium = "/usr/bin/chromium"

// TestConsoleApprovalStartsInstall: a person approves a discovered host
// from the web console, in chromium, and watches the install start on the
// fleet page without reloading it: the agent service and its controllers
// run, and the machine is the simulator's, booted from the discovery ISO.
func TestConsoleApprovalStartsInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (Debian's chromium; hack/deps.sh test installs it): %v", chromium, err)
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(100 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := context.Background()
	const ns, name = "console-sno", "console-sno"
	lab, ie := start(t, g, ns, 1, 0, "127.77.15")
	agent := awaitingApproval(g, lab, ie, name)

	// The console, acting as a person bound to the namespace's admin role.
	srv, err := console.New(console.Config{API: env.Config, Log: logr.Discard()})
	g.Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	token := namespaceAdminToken(t, g, ns, "operator")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 900), chromedp.UserDataDir(t.TempDir()))
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute) // bounds a broken test only
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(bctx, opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	dir := filepath.Join(t.TempDir(), "artifacts")
	if a := os.Getenv("METALSHIFT_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console-e2e")
	}
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, t)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o600)
		})
	}
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond))(ctx, t)
			return err
		})
	}
	agentRow := chromedp.CSS(`tr[data-key="Agent/` + ns + `/` + agent.Name + `"]`)
	aciRow := `tr[data-key="AgentClusterInstall/` + ns + `/` + name + `"]`
	g.Expect(chromedp.Do(browser,
		chromedp.Navigate(hs.URL+"/signin"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.Navigate(hs.URL+"/hosts"),
		chromedp.WaitVisible(chromedp.ID("namespace")),
		chromedp.SendKeys(chromedp.ID("namespace"), ns+"\n"),
		chromedp.WaitVisible(agentRow+" button.approve"),
		shot("hosts-waiting"),
		chromedp.Click(agentRow+" button.approve"),
		until(`document.querySelector('`+string(agentRow)+` .col-approval')?.textContent === "approved"`),
	)).To(Succeed())
	g.Eventually(func() bool {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: agent.Name}, agent)
		return agent.Spec.Approved
	}).Should(BeTrue(), "approved in the API, as the person")

	// The fleet page, open before the install starts, follows it: the
	// install's state leaves its wait for approval and its progress moves.
	_, err = chromedp.Run(browser, chromedp.Steps(
		chromedp.Navigate(hs.URL+"/fleet"),
		chromedp.WaitVisible(chromedp.ID("namespace")),
		chromedp.SendKeys(chromedp.ID("namespace"), ns+"\n"),
		chromedp.WaitVisible(chromedp.CSS(aciRow)),
	))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = chromedp.Run(browser, chromedp.Evaluate[bool](`window.notReloaded = true`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(chromedp.Do(browser,
		until(`["installing", "finalizing", "adding-hosts"].includes(document.querySelector('`+aciRow+` .col-state')?.textContent)`),
		until(`document.querySelector('`+aciRow+` progress')?.value > 0`),
		until(`window.notReloaded === true`),
		shot("fleet-installing"),
	)).To(Succeed())
	waitCompleted(g, ns, name)
}

// namespaceAdminToken is a token of a new ServiceAccount of ns bound to
// the cluster's admin role in ns only.
func namespaceAdminToken(t *testing.T, g *WithT, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}})).To(Succeed())
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

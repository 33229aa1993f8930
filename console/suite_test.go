package console

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts a kube-apiserver with every CRD and webhook; the
// console needs no controller.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

// logBuffer collects the console's logs, to show that no token is in them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startConsole serves a console for the test environment's API server,
// given its admin configuration (which the console must not use for
// users), logging into the returned buffer.
func startConsole(t *testing.T, tls bool, clk clock.Clock) (*httptest.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	log := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.buf.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
	srv, err := New(Config{API: env.Config, Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var hs *httptest.Server
	if tls {
		hs = httptest.NewTLSServer(srv.Handler())
	} else {
		hs = httptest.NewServer(srv.Handler())
	}
	t.Cleanup(hs.Close)
	return hs, logs
}

// namespace creates a namespace of a unique name.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// serviceAccountToken creates a ServiceAccount in ns bound to role (a
// ClusterRole, cluster-wide when clusterWide, else in ns only) and
// returns a token of it, as a user would get with `kubectl create token`.
func serviceAccountToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule, clusterWide bool) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	objs := []client.Object{sa}
	if clusterWide {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: rules}
		objs = append(objs, role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subject})
	} else {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
		objs = append(objs, role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject})
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// everything is every verb on every resource.
var everything = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}

func newACI(g Gomega, ns, name string) *hiveextv1.AgentClusterInstall {
	aci := &hiveextv1.AgentClusterInstall{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef: &hivev1.ClusterImageSetReference{Name: "openshift-v4.20.0"}, ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 1}, SSHPublicKey: "ssh-ed25519 AAAA a",
	}}
	g.Expect(env.Client.Create(context.Background(), aci)).To(Succeed())
	return aci
}

// setProgress writes an install's state and percentage, as the agent
// service does.
func setProgress(g Gomega, aci *hiveextv1.AgentClusterInstall, state string, percent int64) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(aci), aci); err != nil {
			return err
		}
		aci.Status.DebugInfo.State, aci.Status.Progress.TotalPercentage = state, percent
		return env.Client.Status().Update(ctx, aci)
	}).Should(Succeed())
}

func newAgent(g Gomega, ns, name string) *agentinstallv1.Agent {
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.AgentSpec{Hostname: name + ".example.com", Role: agentinstallv1.HostRoleMaster}}
	g.Expect(env.Client.Create(context.Background(), a)).To(Succeed())
	return a
}

// approved reads whether a is approved, from the API.
func approved(a *agentinstallv1.Agent) func() (bool, error) {
	return func() (bool, error) {
		got := &agentinstallv1.Agent{}
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), got)
		return got.Spec.Approved, err
	}
}

// agentSpec is a's spec as the API has it.
func agentSpec(g Gomega, a *agentinstallv1.Agent) agentinstallv1.AgentSpec {
	got := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), got)).To(Succeed())
	return got.Spec
}

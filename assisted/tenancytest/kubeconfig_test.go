package tenancytest

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
)

// TestImportedKubeconfigRefused: an imported cluster's admin kubeconfig is
// the tenant's; one that asks the hub to run a command, to send one of the
// hub's files (its service account token) or to connect through a proxy
// is refused, by name, in the install's SpecSynced condition (and the
// ClusterDeployment's mirror of it), while a host joining the cluster
// would have the hub read it: the command does not run, the server and
// the proxy named see nothing.
func TestImportedKubeconfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cluster, user string // what the kubeconfig adds to them
		refused       string
	}{
		{name: "exec plugin", user: "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n" +
			"      command: /bin/sh\n      args: [-c, 'touch {marker}']\n",
			refused: "users[admin].user.exec: an exec plugin would run a command in the hub's process"},
		{name: "token file", user: "    tokenFile: {token}\n",
			refused: "users[admin].user.tokenFile: a file path would read one of the hub's files; give the token inline (token)"},
		{name: "proxy", cluster: "    proxy-url: http://{proxy}\n", user: "    token: tenant-token\n",
			refused: "clusters[spoke].cluster.proxy-url: the hub does not connect through a proxy a kubeconfig names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			server, ca, requests := spokeServer(t)
			proxy, proxied := countingProxy(t)
			dir := t.TempDir()
			marker, token := filepath.Join(dir, "exec-ran"), filepath.Join(dir, "token")
			g.Expect(os.WriteFile(token, []byte("hub-canary-token"), 0o600)).To(Succeed())
			fill := strings.NewReplacer("{marker}", marker, "{token}", token, "{proxy}", proxy)
			kubeconfig := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: spoke, user: admin}\n" +
				"clusters:\n- name: spoke\n  cluster:\n    server: " + server + "\n    certificate-authority-data: " + ca + "\n" + fill.Replace(tc.cluster) +
				"users:\n- name: admin\n  user:\n" + fill.Replace(tc.user)

			ns := env.Namespace(t)
			importedCluster(t, g, ns, []byte(kubeconfig))
			// A host joining the cluster: the reconcile that counts it
			// approves its CSRs there, through the kubeconfig.
			createAgent(g, env.Client, ns, "joiner", agentinstallv1.HostRoleWorker, &agentinstallv1.ClusterReference{Namespace: ns, Name: "cluster"},
				agentHost{hostname: "joiner", mac: "52:54:00:7e:01:01", stage: "Rebooting"})
			g.Eventually(func(g Gomega) int { return workersDiscovered(g, ns) }).Should(Equal(1))
			want := "clusterMetadata.adminKubeconfigSecretRef: Secret admin-kubeconfig: the kubeconfig is refused: " + tc.refused
			g.Eventually(func(g Gomega) {
				c := aciCondition(g, ns, "SpecSynced")
				g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
				g.Expect(c.Reason).To(Equal("InputError"))
				g.Expect(c.Message).To(ContainSubstring(want))
			}).Should(Succeed())
			g.Eventually(func(g Gomega) []hivev1.ClusterDeploymentCondition {
				cd := &hivev1.ClusterDeployment{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cluster"}, cd)).To(Succeed())
				return cd.Status.Conditions
			}).Should(ContainElement(And(HaveField("Type", "ClusterInstallSpecSynced"), HaveField("Message", ContainSubstring(want)))))
			g.Expect(marker).NotTo(BeAnExistingFile(), "the exec plugin never ran")
			g.Expect(requests.Load()).To(BeZero(), "the server the kubeconfig names saw no request")
			g.Expect(proxied.Load()).To(BeZero(), "the proxy the kubeconfig names saw no connection")
		})
	}
}

// spokeServer is an https server standing for the installed cluster's
// API, counting the requests it gets, and its CA as kubeconfig data.
func spokeServer(t *testing.T) (url, ca string, requests *atomic.Int32) {
	requests = &atomic.Int32{}
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(server.Close)
	ca = base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}))
	return server.URL, ca, requests
}

// countingProxy listens for proxied connections and counts them.
func countingProxy(t *testing.T) (addr string, connections *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	connections = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			_ = c.Close()
		}
	}()
	return l.Addr().String(), connections
}

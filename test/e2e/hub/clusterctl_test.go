package hub

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/manager"
	"github.com/metalshift/metalshift/manager/providers"
)

// ccVariables are the values of the clusterctl variables in
// TestClusterctlInit: where the machines reach the providers' servers, the
// addresses of the load balancers in front of their Services (the test's
// proxy), on loopback, at the host names of serverHosts, which the
// servers' certificates hold, as a site's DNS would resolve them to the
// load balancers.
type ccVariables struct {
	// lbs are the load balancers' listeners by server name (deploy,
	// ignition, agent-service), open from the start so that no other test
	// takes their ports before they serve.
	lbs map[string]net.Listener
}

// The host names the machines reach the servers at. The installed
// cluster's machines resolve ignitionHost in the simulated network (sim
// bmc --add-host); the BMCs and deploy agents of the simulator resolve
// names with this machine's resolver: localhost.
const (
	ignitionHost = "ignition.hub.test"
	machineHost  = "localhost"
)

// serverHosts are the host names of the servers, by name.
var serverHosts = map[string]string{"deploy": machineHost, "ignition": ignitionHost, "agent-service": machineHost}

// TestClusterctlInit installs metalshift on a fresh hub the way
// docs/production.md tells a user to: a local repository written by
// hack/clusterctl-repo's code, a clusterctl config file naming it, the
// signing key and machine CA Secrets, and `bin/clusterctl init` with every
// provider. It
// checks what clusterctl created (CRDs with contract labels, namespaces,
// Deployments, Services, webhook configurations, its Provider inventory),
// then runs each provider's replicas as `manager` processes with exactly
// their Deployment's arguments and environment, read back from the hub,
// replacing only what needs a pod: the in-cluster config becomes a
// kubeconfig with a token of the provider's ServiceAccount (so its RBAC
// is what is tested), $(VAR) references are expanded from the container's
// environment (the downward API's values filled in), mounted Secrets are
// files written from those Secrets, and listen ports are free loopback
// ports. Each replica becomes live and ready, each provider elects one
// leader, every webhook path and conversion its configurations name is
// served with the certificate of the Service's name, and the deploy,
// ignition and agent servers serve https only, with certificates the
// machine CA signed for their host names, handing machines that CA. Then
// each leader
// is SIGKILLed and the other replica takes its Lease over; no replica was
// refused anything by its ServiceAccount's RBAC.
//
// The hub reaches the webhook Services through the test's stand-in for a
// pod network and kube-proxy: kube-apiserver's egress to the cluster goes
// through an HTTP CONNECT proxy (localcp.Options.ServiceProxySocket) that
// sends each Service's cluster IP and port on to its provider's replicas.
// The machines reach the deploy, ignition and agent servers through
// stand-ins for the load balancers of their Services, at the addresses the
// clusterctl variables name. A cluster is installed with the simulator,
// and while a host is being provisioned every provider's leader is
// SIGKILLed: the other replicas take the Leases over and finish the
// install, no disk is written twice, and no replica was refused anything
// by its ServiceAccount's RBAC.
//
// The hub has no cert-manager (no container runtime runs it here): the
// test installs its CRDs (Issuer, Certificate, ClusterIssuer) as a
// stand-in for an existing cert-manager, which is what clusterctl checks,
// and plays cert-manager's part itself: it issues each Certificate into
// the Secret it names (self-signed, or signed by the machine CA of the CA
// Issuer it names), and injects the CA where cert-manager.io/inject-ca-from
// says.
func TestClusterctlInit(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	work := t.TempDir()
	managerBin := filepath.Join(work, "manager")
	out, err := exec.Command("go", "build", "-o", managerBin, "../../../cmd/manager").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "building the manager: %s", out)

	// A fresh hub: etcd, kube-apiserver, kube-controller-manager, no CRDs.
	serviceNetwork := filepath.Join(work, "services.sock")
	hub, hubc := startServiceHub(t, g, localcp.Options{Dir: filepath.Join(work, "hub"), ServiceProxySocket: serviceNetwork})
	kubeconfig := hub.Kubeconfig()
	cc := clusterctlInit(t, g, ctx, hubc, kubeconfig, work)
	vars := cc.vars

	// Each provider's replicas, as its Deployment runs them, on loopback
	// ports reserved together (so that no two get the same), released just
	// before the processes start.
	ports := &portReservations{}
	var all []*ccProvider
	for _, p := range providers.All() {
		cp := &ccProvider{Provider: p}
		d := &appsv1.Deployment{}
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: p.Namespace(), Name: providers.DeploymentName}, d)).To(Succeed())
		g.Expect(d.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/provider", p.Label()))
		g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2), "$METALSHIFT_REPLICAS defaults to 2")
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--components=" + strings.Join(p.Components, ",")))
		kc := serviceAccountKubeconfig(ctx, g, hub, p.Namespace(), d.Spec.Template.Spec.ServiceAccountName, filepath.Join(work, p.Label()+".kubeconfig"))
		for i := range int(*d.Spec.Replicas) {
			r := podProcess(ctx, g, hubc, d, i, kc, filepath.Join(work, p.Label()), ports)
			if p.Label() == "infrastructure-metal" {
				// The simulator's BMCs listen on loopback, which the BMC
				// egress policy refuses unless the hub allows it, as
				// docs/production.md tells a site with such BMCs to.
				r.args = append(r.args, "--bmc-allow-loopback")
			}
			cp.replicas = append(cp.replicas, r)
		}
		all = append(all, cp)
	}
	ports.release()
	for _, cp := range all {
		for _, r := range cp.replicas {
			r.start(t, managerBin, r.args)
		}
	}
	// The pod network the hub reaches the webhook Services through, and
	// the load balancers of the servers' Services.
	proxy := newServiceProxy(t)
	g.Expect(proxy.serveConnect(serviceNetwork, func(target string) []string { return serviceBackends(ctx, hubc, all, target) })).To(Succeed())
	for _, cp := range all {
		for _, s := range cp.Servers {
			g.Expect(vars.lbs).To(HaveKey(s.Name))
			var backends []string
			for _, r := range cp.replicas {
				backends = append(backends, r.ports[s.Name])
			}
			proxy.serveOn(vars.lbs[s.Name], func() []string { return backends })
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, cp := range all {
				for _, r := range cp.replicas {
					data, _ := os.ReadFile(r.log)
					var errs []string
					for _, l := range strings.Split(string(data), "\n") {
						if strings.Contains(l, `"level":"error"`) && !strings.Contains(l, "Error initially creating lease lock") {
							errs = append(errs, tail(l, 1000))
						}
					}
					t.Logf("%s log: %d error lines, the first:\n%s", r.name, len(errs), strings.Join(errs[:min(len(errs), 10)], "\n"))
					t.Logf("%s log (tail):\n%s", r.name, tail(string(data), 8000))
				}
			}
		}
	})

	for _, cp := range all {
		// Live and ready, every replica.
		for _, r := range cp.replicas {
			for _, path := range []string{"/healthz", "/readyz"} {
				g.Eventually(func() error { return getOK("http://" + r.healthAddr + path) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "%s %s", r.name, path)
			}
		}
		// One leader, holding the Lease in the provider's namespace.
		g.Eventually(func() int {
			n := 0
			for _, r := range cp.replicas {
				if r.acquiredLease() {
					n++
				}
			}
			return n
		}, 2*time.Minute, 200*time.Millisecond).Should(Equal(1), "%s elects one leader", cp.Label())
		lease := &coordinationv1.Lease{}
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: cp.Namespace(), Name: manager.Name}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		for _, r := range cp.replicas {
			g.Expect(r.running()).To(BeTrue(), "%s runs", r.name)
		}
	}

	// Every webhook and conversion the hub calls is served by each replica,
	// with a certificate for the webhook Service's name.
	for _, cp := range all {
		paths := webhookPaths(ctx, g, hubc, cp.Namespace())
		for _, r := range cp.replicas {
			for _, path := range paths {
				g.Eventually(func() error { return r.callWebhook(path) }, time.Minute, 200*time.Millisecond).Should(Succeed(), "%s serves %s", r.name, path)
			}
			for _, addr := range r.servers {
				g.Eventually(func() error { return dial(addr) }, time.Minute, 200*time.Millisecond).Should(Succeed(), "%s serves on %s", r.name, addr)
			}
		}
		if len(paths) > 0 {
			t.Logf("%s: %d replicas live, ready, one leader; webhooks served: %s", cp.Label(), len(cp.replicas), strings.Join(paths, " "))
		}
	}
	// The deploy server, the ignition server and the agent service speak
	// https with certificates the machine CA signed for their host names,
	// and hand machines that CA.
	for _, cp := range all {
		d := &appsv1.Deployment{}
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: cp.Namespace(), Name: providers.DeploymentName}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(ContainSubstring("insecure-http")))
		for _, s := range cp.Servers {
			g.Expect(secretData(ctx, g, hubc, cp.Namespace(), s.CertSecret())["ca.crt"]).To(Equal(cc.machineCA.Cert), "%s's machines get the machine CA", s.Name)
			for _, r := range cp.replicas {
				g.Expect(tlsHandshake(r.ports[s.Name], serverHosts[s.Name], cc.machineCA.Cert)).To(Succeed(), "%s serves %s over https", r.name, s.Name)
			}
		}
	}

	// The web console, as people reach it: https with its self-signed
	// certificate for its Service's name, a user signing in with a token of
	// their own, and a made-up token refused. Its ServiceAccount has no
	// ClusterRole: the console acts as the user.
	for _, cp := range all {
		if cp.ConsolePort == 0 {
			continue
		}
		ca := secretData(ctx, g, hubc, cp.Namespace(), providers.ConsoleCertSecret)["ca.crt"]
		host := providers.ConsoleService + "." + cp.Namespace() + ".svc"
		g.Expect(hubc.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "console-user", Namespace: "default"}})).To(Succeed())
		token := serviceAccountToken(ctx, g, hub, "default", "console-user")
		for _, r := range cp.replicas {
			page, err := consoleSignIn(r.ports[providers.Console], host, ca, token)
			g.Expect(err).NotTo(HaveOccurred(), "%s: signing in to the console", r.name)
			g.Expect(page).To(ContainSubstring("system:serviceaccount:default:console-user"), "%s: the fleet page, as the user", r.name)
			_, err = consoleSignIn(r.ports[providers.Console], host, ca, "made-up")
			g.Expect(err).To(MatchError(ContainSubstring("401")), "%s: a made-up token", r.name)
		}
		t.Logf("%s: a user signed in to each replica's console", cp.Label())
	}

	// An install, as a user would run it against this hub.
	hostsYAML, imageURL, imageSum, console := startSimWith(t, 3, "--console", "--add-host", ignitionHost+"=127.0.0.1")
	inst := startLargeInstall(t, g, filepath.Join(work, "install"), kubeconfig, hostsYAML, imageURL, imageSum, func() {
		t.Logf("simulator:\n%s", tail(console.String(), 20000))
	})
	midway, seen := waitMidProvisioning(g, hubc, inst.out)

	// Leader failover mid-provisioning: each provider's leader is
	// SIGKILLed, and the other replica takes the Lease over, keeps serving
	// and finishes the install.
	firstHolder := map[string]string{}
	for _, cp := range all {
		lease := &coordinationv1.Lease{}
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: cp.Namespace(), Name: manager.Name}, lease)).To(Succeed())
		firstHolder[cp.Label()] = *lease.Spec.HolderIdentity
		for _, r := range cp.replicas {
			if r.acquiredLease() {
				g.Expect(r.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
				g.Eventually(r.done, time.Minute).Should(BeClosed())
				t.Logf("SIGKILLed %s, the leader", r.name)
			}
		}
	}
	t.Logf("killed every leader mid-provisioning; hosts: %s", strings.Join(seen, "; "))
	for _, cp := range all {
		for _, r := range cp.replicas {
			if !r.running() {
				continue
			}
			g.Eventually(r.acquiredLease, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "%s takes the Lease over", r.name)
			g.Expect(getOK("http://" + r.healthAddr + "/readyz")).To(Succeed())
		}
		lease := &coordinationv1.Lease{}
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: cp.Namespace(), Name: manager.Name}, lease)).To(Succeed())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(firstHolder[cp.Label()]), "%s: the Lease changed holder", cp.Label())
	}
	inst.wait(t, g)
	checkDiskWrites(t, g, console.String(), midway)

	// The ServiceAccounts' RBAC let every replica do what it did.
	for _, cp := range all {
		for _, r := range cp.replicas {
			data, err := os.ReadFile(r.log)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).NotTo(ContainSubstring("forbidden"), "%s: its ClusterRole lacks a permission", r.name)
		}
	}

	// Upgrading, as docs/production.md says: the next version generated
	// into the same repository, the variables added again, clusterctl
	// upgrade plan and apply.
	const next = "v0.2.0"
	g.Expect(providers.WriteRepository(cc.repo, providers.Options{Version: next})).To(Succeed())
	addVariables(g, cc.config, vars)
	plan := exec.Command(cc.clusterctl, "upgrade", "plan", "--config", cc.config, "--kubeconfig", kubeconfig)
	plan.Env = cc.env
	out, err = plan.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl upgrade plan:\n%s", out)
	g.Expect(strings.Count(string(out), next)).To(BeNumerically(">=", len(all)), "every provider can be upgraded to %s:\n%s", next, out)
	apply := exec.Command(cc.clusterctl, "upgrade", "apply", "--config", cc.config, "--kubeconfig", kubeconfig, "--contract", "v1beta2")
	apply.Env = cc.env
	out, err = apply.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl upgrade apply:\n%s", out)
	t.Logf("clusterctl upgrade apply:\n%s", out)
	var want []string
	for _, p := range providers.All() {
		want = append(want, fmt.Sprintf("%s %s %s %s", p.Namespace(), p.Type, p.Name, next))
		d := &appsv1.Deployment{}
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: p.Namespace(), Name: providers.DeploymentName}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(providers.DefaultImage(next)))
		if p.SigningKey() {
			g.Expect(secretData(ctx, g, hubc, p.Namespace(), providers.SigningKeySecret)).To(HaveKeyWithValue("key", cc.signingKey), "the signing key is kept")
		}
	}
	g.Expect(installedProviders(ctx, g, hubc)).To(ConsistOf(want), "clusterctl's inventory after the upgrade")
}

// startServiceHub starts a fresh hub, stopped at the test's end, and
// returns it with a client that knows every kind of metalshift's.
func startServiceHub(t *testing.T, g Gomega, opts localcp.Options) (*localcp.Hub, client.Client) {
	hub, err := localcp.Start(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(hub.Stop)
	scheme, err := manager.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	hubc, err := client.New(hub.RESTConfig(), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return hub, hubc
}

// ccVersion is the providers' version clusterctl installs.
const ccVersion = "v0.1.0"

// ccHub is a hub metalshift was installed on with clusterctl init.
type ccHub struct {
	clusterctl, repo, config string
	// env is clusterctl's environment (its own HOME).
	env  []string
	vars ccVariables
	// signingKey is in the signing key Secrets.
	signingKey []byte
	// machineCA is in the machine CA Secrets.
	machineCA certs.KeyPair
}

// clusterctlInit installs metalshift on a fresh hub as docs/production.md
// steps 3 to 6 say, with every provider, playing cert-manager's part, and
// checks what clusterctl created. The providers' Deployments are left for
// the caller to run.
func clusterctlInit(t *testing.T, g Gomega, ctx context.Context, hubc client.Client, kubeconfig, work string) *ccHub {
	clusterctl := filepath.Join(toolsDir, "clusterctl")
	_, err := os.Stat(clusterctl)
	g.Expect(err).NotTo(HaveOccurred(), "build it with `make tools` (hack/tools/build.sh clusterctl)")
	installCertManagerCRDs(ctx, g, hubc)

	// The repository and the config file, as docs/production.md steps 3 and 4.
	repo := filepath.Join(work, "repo")
	g.Expect(providers.WriteRepository(repo, providers.Options{Version: ccVersion})).To(Succeed())
	config := filepath.Join(repo, "clusterctl.yaml")
	vars := ccVariables{lbs: map[string]net.Listener{}}
	for _, server := range []string{"deploy", "ignition", "agent-service"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { ln.Close() })
		vars.lbs[server] = ln
	}
	addVariables(g, config, vars)

	// clusterctl init, step 5.
	init := exec.Command(clusterctl, "init", "--config", config, "--kubeconfig", kubeconfig, "--core", "cluster-api:"+ccVersion,
		"--infrastructure", "metal", "--bootstrap", "openshift", "--control-plane", "openshift", "--addon", "agent,console")
	clusterctlEnv := append(os.Environ(), "HOME="+work, "XDG_CONFIG_HOME="+filepath.Join(work, "config"))
	init.Env = clusterctlEnv
	out, err := init.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl init:\n%s", out)
	t.Logf("clusterctl init:\n%s", out)
	g.Expect(string(out)).To(ContainSubstring("Skipping installing cert-manager as it is already installed"))
	g.Expect(string(out)).To(ContainSubstring("Your management cluster has been initialized successfully!"))

	// What clusterctl created.
	var want []string
	for _, p := range providers.All() {
		want = append(want, fmt.Sprintf("%s %s %s %s", p.Namespace(), p.Type, p.Name, ccVersion))
	}
	g.Expect(installedProviders(ctx, g, hubc)).To(ConsistOf(want), "clusterctl's inventory")

	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(hubc.List(ctx, crds)).To(Succeed())
	byProvider := map[string][]string{}
	for _, crd := range crds.Items {
		label := crd.Labels["cluster.x-k8s.io/provider"]
		byProvider[label] = append(byProvider[label], crd.Name)
		if label != "" && label != "cluster-api" {
			g.Expect(crd.Labels).To(HaveKey("cluster.x-k8s.io/v1beta2"), crd.Name)
		}
	}
	g.Expect(byProvider["infrastructure-metal"]).To(ContainElements("metalmachines.infrastructure.cluster.x-k8s.io", "baremetalhosts.metal3.io"))
	g.Expect(byProvider["bootstrap-openshift"]).To(ContainElement("openshiftconfigs.bootstrap.cluster.x-k8s.io"))
	g.Expect(byProvider["control-plane-openshift"]).To(ContainElement("openshiftcontrolplanes.controlplane.cluster.x-k8s.io"))
	g.Expect(byProvider["addon-agent"]).To(ContainElements("agents.agent-install.openshift.io", "clusterdeployments.hive.openshift.io"))
	g.Expect(byProvider["cluster-api"]).To(ContainElements("clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io"))

	// Step 6: the signing key and the machine CA Secrets, in each namespace
	// of a provider with servers.
	key := make([]byte, 32)
	_, err = rand.Read(key)
	g.Expect(err).NotTo(HaveOccurred())
	machineCA, err := certs.NewCA("metalshift machine CA")
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range providers.All() {
		if p.SigningKey() {
			g.Expect(hubc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: providers.SigningKeySecret, Namespace: p.Namespace()},
				Data: map[string][]byte{"key": key}})).To(Succeed())
		}
		if p.MachineCA() {
			g.Expect(hubc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: providers.MachineCASecret, Namespace: p.Namespace()},
				Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": machineCA.Cert, "tls.key": machineCA.Key}})).To(Succeed())
		}
	}
	playCertManager(ctx, g, hubc)
	return &ccHub{clusterctl: clusterctl, repo: repo, config: config, env: clusterctlEnv, vars: vars, signingKey: key, machineCA: machineCA}
}

// addVariables adds the variables to a clusterctl config file, as
// docs/production.md step 4 says.
func addVariables(g Gomega, config string, v ccVariables) {
	f, err := os.OpenFile(config, os.O_APPEND|os.O_WRONLY, 0)
	g.Expect(err).NotTo(HaveOccurred())
	for _, server := range []string{"deploy", "ignition", "agent-service"} {
		name := "METALSHIFT_" + strings.ToUpper(strings.ReplaceAll(server, "-", "_"))
		_, err = fmt.Fprintf(f, "%s_HOST: %q\n%s_PORT: \"%d\"\n", name, serverHosts[server], name, v.lbs[server].Addr().(*net.TCPAddr).Port)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = fmt.Fprintf(f, "CLUSTERCTL_DISABLE_VERSIONCHECK: \"true\"\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
}

// installedProviders lists clusterctl's inventory: "<namespace> <type> <name> <version>".
func installedProviders(ctx context.Context, g Gomega, hubc client.Client) []string {
	inventory := &unstructured.UnstructuredList{}
	inventory.SetGroupVersionKind(clusterctlv1.GroupVersion.WithKind("ProviderList"))
	g.Expect(hubc.List(ctx, inventory)).To(Succeed())
	var installed []string
	for _, p := range inventory.Items {
		name, _, _ := unstructured.NestedString(p.Object, "providerName")
		typ, _, _ := unstructured.NestedString(p.Object, "type")
		v, _, _ := unstructured.NestedString(p.Object, "version")
		installed = append(installed, fmt.Sprintf("%s %s %s %s", p.GetNamespace(), typ, name, v))
	}
	return installed
}

// serviceBackends are the addresses of the replicas behind the Service
// port target ("<cluster IP>:<port>"), as kube-proxy would find them: the
// Service's target port, a named container port, of the replicas of the
// provider of the Service's namespace.
func serviceBackends(ctx context.Context, hubc client.Client, all []*ccProvider, target string) []string {
	svc, port, err := serviceOf(ctx, hubc, target)
	if err != nil || svc == nil {
		return nil
	}
	for _, cp := range all {
		if cp.Namespace() != svc.Namespace {
			continue
		}
		var backends []string
		for _, r := range cp.replicas {
			if addr := r.ports[port.TargetPort.StrVal]; addr != "" {
				backends = append(backends, addr)
			}
		}
		return backends
	}
	return nil
}

// serviceOf is the Service at "<cluster IP>:<port>", and that port of it;
// nil when no Service is there.
func serviceOf(ctx context.Context, hubc client.Client, target string) (*corev1.Service, *corev1.ServicePort, error) {
	ip, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, nil, err
	}
	services := &corev1.ServiceList{}
	if err := hubc.List(ctx, services); err != nil {
		return nil, nil, err
	}
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.Spec.ClusterIP != ip {
			continue
		}
		for j := range svc.Spec.Ports {
			if strconv.Itoa(int(svc.Spec.Ports[j].Port)) == port {
				return svc, &svc.Spec.Ports[j], nil
			}
		}
	}
	return nil, nil, nil
}

// ccProvider is a provider's replicas in TestClusterctlInit.
type ccProvider struct {
	providers.Provider
	replicas []*podReplica
}

// podReplica is a manager process standing in for one pod of a Deployment.
type podReplica struct {
	replica
	args       []string
	webhook    string            // loopback address of the webhook server
	webhookTLS *tls.Config       // trusts the webhook Service's certificate, for its name
	servers    []string          // loopback addresses of the HTTP servers, in container port order
	ports      map[string]string // container port → loopback address
}

// podProcess turns the i-th pod of d into a process: the container's args
// and env, with only what needs a pod replaced.
func podProcess(ctx context.Context, g Gomega, hubc client.Client, d *appsv1.Deployment, i int, kubeconfig, dir string, free *portReservations) *podReplica {
	podName := fmt.Sprintf("%s-%d", d.Name, i)
	c := d.Spec.Template.Spec.Containers[0]
	r := &podReplica{replica: replica{name: podName + " (" + d.Namespace + ")", log: filepath.Join(dir, podName+".log")}, ports: map[string]string{}}
	g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())

	// The environment: the container's, the downward API filled in, and the
	// kubeconfig the in-cluster config stands for.
	vars := map[string]string{}
	env := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			g.Expect(e.ValueFrom.FieldRef).NotTo(BeNil(), "env %s: only the downward API", e.Name)
			v = map[string]string{"metadata.namespace": d.Namespace, "metadata.name": podName}[e.ValueFrom.FieldRef.FieldPath]
			g.Expect(v).NotTo(BeEmpty(), "env %s: %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	r.env = env

	// Mounted Secrets: files written from them.
	mounts := map[string]string{} // mount path → local dir
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		g.Expect(v.Secret).NotTo(BeNil(), "volume %s: only Secrets", m.Name)
		local := filepath.Join(dir, fmt.Sprintf("%d-%s", i, m.Name))
		g.Expect(os.MkdirAll(local, 0o700)).To(Succeed())
		for k, data := range secretData(ctx, g, hubc, d.Namespace, v.Secret.SecretName) {
			g.Expect(os.WriteFile(filepath.Join(local, k), data, 0o600)).To(Succeed())
		}
		mounts[m.MountPath] = local
	}
	// The image's own files: its live images are the ones `make images`
	// built it with.
	mounts[manager.ImageLiveDir] = imageLiveDir(g)

	// Ports: free loopback ones.
	byNumber := map[string]string{}
	for _, p := range c.Ports {
		addr := free.reserve(g)
		r.ports[p.Name] = addr
		byNumber[strconv.Itoa(int(p.ContainerPort))] = addr
	}
	r.healthAddr = r.ports["healthz"]
	r.webhook = r.ports["webhook-server"]
	for _, p := range c.Ports {
		if p.Name != "healthz" && p.Name != "metrics" && p.Name != "webhook-server" {
			r.servers = append(r.servers, r.ports[p.Name])
		}
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, a := range c.Args {
		a = expand.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		flag, value, _ := strings.Cut(a, "=")
		for mountPath, local := range mounts {
			if rest, ok := strings.CutPrefix(value, mountPath); ok {
				value = local + rest
			}
		}
		if port, ok := strings.CutPrefix(value, ":"); ok && byNumber[port] != "" {
			value = byNumber[port]
		}
		if flag == "--webhook-port" && value != "0" {
			g.Expect(byNumber).To(HaveKey(value), "the webhook port is a container port")
			host, port, _ := net.SplitHostPort(byNumber[value])
			r.args = append(r.args, "--webhook-host="+host)
			value = port
		}
		if value != "" || strings.Contains(a, "=") {
			a = flag + "=" + value
		}
		r.args = append(r.args, a)
	}
	if r.webhook != "" {
		ca := secretData(ctx, g, hubc, d.Namespace, "metalshift-webhook-service-cert")["ca.crt"]
		pool := x509.NewCertPool()
		g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
		r.webhookTLS = &tls.Config{RootCAs: pool, ServerName: providers.WebhookService + "." + d.Namespace + ".svc", MinVersion: tls.VersionTLS12}
	}
	return r
}

// imageLiveDir is where the live images of the manager's image are on this
// machine: `make images` builds them into $METALSHIFT_IMAGES_DIR, then the
// image with them.
func imageLiveDir(g Gomega) string {
	dir := os.Getenv("METALSHIFT_IMAGES_DIR")
	_, err := os.Stat(filepath.Join(dir, imageservice.LiveISOFile))
	g.Expect(dir != "" && err == nil).To(BeTrue(), "the manager's image holds the live images: build them with make images (METALSHIFT_IMAGES_DIR=%q)", dir)
	return dir
}

// portReservations hands out free loopback addresses, each held until
// release, so that none is handed out twice.
type portReservations struct{ held []net.Listener }

func (p *portReservations) reserve(g Gomega) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	p.held = append(p.held, l)
	return l.Addr().String()
}

func (p *portReservations) release() {
	for _, l := range p.held {
		l.Close()
	}
	p.held = nil
}

// callWebhook posts an empty review to path and expects the webhook's
// answer, not a 404.
func (r *podReplica) callWebhook(path string) error {
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"e2e"}}`
	if path == "/convert" {
		body = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"e2e","desiredAPIVersion":"cluster.x-k8s.io/v1beta2","objects":[]}}`
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: r.webhookTLS}, Timeout: 10 * time.Second}
	resp, err := hc.Post("https://"+r.webhook+path, "application/json", strings.NewReader(body)) //nolint:noctx // a test's loopback URL
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var review struct {
		Kind     string
		Response *struct{ UID string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || resp.StatusCode != http.StatusOK || review.Response == nil {
		return fmt.Errorf("%s: %s, %s (%v)", path, resp.Status, review.Kind, err)
	}
	return nil
}

// webhookPaths are the paths the hub calls on the webhook Service of ns:
// those of its webhook configurations and CRD conversions.
func webhookPaths(ctx context.Context, g Gomega, hubc client.Client, ns string) []string {
	var paths []string
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	g.Expect(hubc.List(ctx, mutating)).To(Succeed())
	for _, m := range mutating.Items {
		for _, w := range m.Webhooks {
			if s := w.ClientConfig.Service; s != nil && s.Namespace == ns {
				g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), "%s: the CA is injected", m.Name)
				paths = append(paths, *s.Path)
			}
		}
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(hubc.List(ctx, validating)).To(Succeed())
	for _, v := range validating.Items {
		for _, w := range v.Webhooks {
			if s := w.ClientConfig.Service; s != nil && s.Namespace == ns {
				g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), "%s: the CA is injected", v.Name)
				paths = append(paths, *s.Path)
			}
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(hubc.List(ctx, crds)).To(Succeed())
	for _, crd := range crds.Items {
		if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig.Service != nil && c.Webhook.ClientConfig.Service.Namespace == ns {
			g.Expect(c.Webhook.ClientConfig.CABundle).NotTo(BeEmpty(), "%s: the CA is injected", crd.Name)
			if len(paths) == 0 || paths[len(paths)-1] != "/convert" {
				paths = append(paths, *c.Webhook.ClientConfig.Service.Path)
			}
		}
	}
	return paths
}

// installCertManagerCRDs installs cert-manager's CRDs, as an existing
// cert-manager would have: only their names and versions matter here.
func installCertManagerCRDs(ctx context.Context, g Gomega, hubc client.Client) {
	for _, k := range []struct {
		kind, plural string
		scope        apiextensionsv1.ResourceScope
	}{
		{"Issuer", "issuers", apiextensionsv1.NamespaceScoped},
		{"Certificate", "certificates", apiextensionsv1.NamespaceScoped},
		{"ClusterIssuer", "clusterissuers", apiextensionsv1.ClusterScoped},
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io", Scope: k.scope,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, ListKind: k.kind + "List", Plural: k.plural, Singular: strings.ToLower(k.kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true),
					}},
				}},
			},
		}
		g.Expect(hubc.Create(ctx, crd)).To(Succeed())
		g.Eventually(func() bool {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if hubc.Get(ctx, client.ObjectKeyFromObject(crd), got) != nil {
				return false
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}, time.Minute, 100*time.Millisecond).Should(BeTrue(), crd.Name)
	}
}

// playCertManager does what cert-manager does for the providers: issues
// each Certificate into its Secret, self-signed or signed by the CA of the
// CA Issuer it names (whose Secret must exist), and injects its CA into the
// objects annotated cert-manager.io/inject-ca-from.
func playCertManager(ctx context.Context, g Gomega, hubc client.Client) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "CertificateList"})
	g.Expect(hubc.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).NotTo(BeEmpty())
	caOf := map[string][]byte{} // namespace/name → CA
	for _, c := range list.Items {
		dnsNames, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		secretName, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		issuerName, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		issuer := &unstructured.Unstructured{}
		issuer.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"})
		g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: c.GetNamespace(), Name: issuerName}, issuer)).To(Succeed(), "the Issuer of %s", c.GetName())
		var certPEM, keyPEM, caPEM []byte
		if caSecret, ok, _ := unstructured.NestedString(issuer.Object, "spec", "ca", "secretName"); ok {
			ca := secretData(ctx, g, hubc, c.GetNamespace(), caSecret)
			kp, err := certs.Issue(certs.KeyPair{Cert: ca["tls.crt"], Key: ca["tls.key"]}, certs.Spec{CommonName: dnsNames[0], DNSNames: dnsNames, Server: true})
			g.Expect(err).NotTo(HaveOccurred())
			certPEM, keyPEM, caPEM = kp.Cert, kp.Key, ca["tls.crt"]
		} else {
			_, selfSigned, _ := unstructured.NestedMap(issuer.Object, "spec", "selfSigned")
			g.Expect(selfSigned).To(BeTrue(), "Issuer %s is self-signed or a CA", issuerName)
			certPEM, keyPEM = selfSignedCert(g, dnsNames)
			caPEM = certPEM
		}
		g.Expect(hubc.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: c.GetNamespace()}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": caPEM},
		})).To(Succeed())
		caOf[c.GetNamespace()+"/"+c.GetName()] = caPEM
	}
	ca := func(o client.Object) []byte {
		from := o.GetAnnotations()[providers.InjectCAAnnotation]
		if from == "" {
			return nil
		}
		g.Expect(caOf).To(HaveKey(from), "%s names a Certificate", o.GetName())
		return caOf[from]
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	g.Expect(hubc.List(ctx, mutating)).To(Succeed())
	for i := range mutating.Items {
		m := &mutating.Items[i]
		if b := ca(m); b != nil {
			for j := range m.Webhooks {
				m.Webhooks[j].ClientConfig.CABundle = b
			}
			g.Expect(hubc.Update(ctx, m)).To(Succeed())
		}
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	g.Expect(hubc.List(ctx, validating)).To(Succeed())
	for i := range validating.Items {
		v := &validating.Items[i]
		if b := ca(v); b != nil {
			for j := range v.Webhooks {
				v.Webhooks[j].ClientConfig.CABundle = b
			}
			g.Expect(hubc.Update(ctx, v)).To(Succeed())
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(hubc.List(ctx, crds)).To(Succeed())
	for i := range crds.Items {
		crd := &crds.Items[i]
		if b := ca(crd); b != nil {
			crd.Spec.Conversion.Webhook.ClientConfig.CABundle = b
			g.Expect(hubc.Update(ctx, crd)).To(Succeed())
		}
	}
}

func selfSignedCert(g Gomega, dnsNames []string) ([]byte, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func secretData(ctx context.Context, g Gomega, hubc client.Client, ns, name string) map[string][]byte {
	s := &corev1.Secret{}
	g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed(), "Secret %s/%s", ns, name)
	return s.Data
}

// serviceAccountKubeconfig writes a kubeconfig with a token of the
// ServiceAccount: what the in-cluster config of its pods authenticates as.
func serviceAccountKubeconfig(ctx context.Context, g Gomega, hub *localcp.Hub, ns, sa, path string) string {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: hub.Server(), CertificateAuthority: hub.CAFile()}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: serviceAccountToken(ctx, g, hub, ns, sa)}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = "hub"
	g.Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// serviceAccountToken is a token of the ServiceAccount ns/sa, valid an hour.
func serviceAccountToken(ctx context.Context, g Gomega, hub *localcp.Hub, ns, sa string) string {
	cs, err := kubernetes.NewForConfig(hub.RESTConfig())
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// consoleSignIn signs in to the console at addr, trusting caPEM for the
// host name serverName, as a browser posts the sign-in form, and returns
// the fleet page it is sent to.
func consoleSignIn(addr, serverName string, caPEM []byte, token string) (string, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return "", fmt.Errorf("no CA in %q", caPEM)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return "", err
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	origin := "https://" + addr
	req, err := http.NewRequest(http.MethodPost, origin+"/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/fleet" {
		return "", fmt.Errorf("signing in: %s at %s", resp.Status, resp.Request.URL.Path)
	}
	return string(body), nil
}

func tlsHandshake(addr, serverName string, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no CA in %q", caPEM)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return c.Close()
}

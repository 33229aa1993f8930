package providers_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
	"github.com/metalshift/metalshift/assisted/reconcilers/infraenv"
	operatormanifests "github.com/metalshift/metalshift/clusterbaremetal/manifests"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/installer"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/manager"
	"github.com/metalshift/metalshift/manager/providers"
	"github.com/metalshift/metalshift/manager/providers/providertest"
)

// TestProvidersAsServiceAccounts runs every provider's components in this
// process with their Deployment's arguments, each as its ServiceAccount
// bound to the roles of its components YAML, against a real
// kube-apiserver (the admission webhooks served as on a hub). Each elects
// its leader in its namespace; then a cluster is installed the way
// `metalshift create cluster` does it and an agent-based install is set
// up: the control plane creates the bootstrap Machine and the cluster's
// Secrets, the Cluster API core adopts its config and infrastructure, the
// bootstrap provider renders its Ignition (served by the ignition server),
// the MetalMachine claims a host and writes its user data, the host engine
// registers the other hosts (whose BMCs do not answer), and the agent
// service's controllers take the InfraEnv, the install and a BareMetalHost
// labelled for it. The first request the API server refuses any provider
// fails the test. Then the API server answers, for each provider's
// ServiceAccount, no to what would make a compromised pod cluster-admin,
// and grants exactly the provider's Secret verbs.
func TestProvidersAsServiceAccounts(t *testing.T) {
	g := NewWithT(t)
	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := filepath.Join(t.TempDir(), "signing-key")
	g.Expect(os.WriteFile(key, bytes.Repeat([]byte("k"), 32), 0o600)).To(Succeed())

	// Every provider, as its ServiceAccount.
	refusals := map[string]*providertest.Refusals{}
	done := map[string]chan error{}
	for _, p := range providers.All() {
		g.Expect(providertest.InstallRBAC(ctx, env.Client, p)).To(Succeed())
		cfg, r := providertest.AsServiceAccount(env.Config, p)
		refusals[p.Label()] = r
		args := managerArgs(t, p, key)
		if p.Label() == "bootstrap-openshift" {
			args = append(args, "--max-user-data-bytes=4096") // the bootstrap node's Ignition is served
		}
		done[p.Label()] = make(chan error, 1)
		go func() { done[p.Label()] <- manager.Run(ctx, cfg, args) }()
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for label, d := range done {
			select {
			case err := <-d:
				g.Expect(err).NotTo(HaveOccurred(), "%s's manager", label)
			case <-time.After(time.Minute):
				t.Errorf("%s's manager did not stop", label)
			}
		}
	}
	t.Cleanup(stop)
	for _, p := range providers.All() {
		g.Eventually(func() string {
			lease := &coordinationv1.Lease{}
			_ = env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace(), Name: manager.Name}, lease)
			return ptr.Deref(lease.Spec.HolderIdentity, "")
		}, time.Minute).ShouldNot(BeEmpty(), "%s elects its leader in its namespace", p.Label())
	}

	name := applyInstall(ctx, g, env.Client)
	ns := name
	agents := applyAgentInstall(ctx, g, env.Client)
	refused := func() []string {
		var all []string
		for _, p := range providers.All() {
			for _, r := range refusals[p.Label()].List() {
				all = append(all, p.Label()+": "+r)
			}
		}
		return all
	}
	// wait waits for what f checks; a refused request ends the wait.
	wait := func(what string, f func(g Gomega)) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			if r := refused(); len(r) > 0 {
				StopTrying("the API server refused " + strings.Join(r, "; ")).Now()
			}
			f(g)
		}, 2*time.Minute, 100*time.Millisecond).Should(Succeed(), what)
		t.Log(what)
	}
	wait("control plane: the cluster's Secrets and the bootstrap Machine", func(g Gomega) {
		for _, s := range []string{name + "-ca", name + "-kubeconfig", name + "-bootstrap-install-config"} {
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s}, &corev1.Secret{})).To(Succeed(), s)
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-bootstrap"}, &clusterv1.Machine{})).To(Succeed())
	})
	wait("bootstrap: the bootstrap node's Ignition, served by the ignition server", func(g Gomega) {
		cfg := &bootstrapv1.OpenShiftConfig{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-bootstrap"}, cfg)).To(Succeed())
		g.Expect(cfg.Status.DataSecretName).NotTo(BeNil(), "%v", cfg.Status.Conditions)
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-bootstrap-ignition"}, &corev1.Secret{})).To(Succeed())
	})
	wait("metal: the bootstrap MetalMachine claims the available host and gives it its user data; the others are registering", func(g Gomega) {
		mm := &infrav1.MetalMachine{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-bootstrap"}, mm)).To(Succeed())
		g.Expect(mm.Status.Host).To(HaveField("Name", availableHost))
		host := &metal3v1.BareMetalHost{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: availableHost}, host)).To(Succeed())
		g.Expect(host.Spec.UserData).NotTo(BeNil())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: host.Spec.UserData.Name}, &corev1.Secret{})).To(Succeed())
		mc := &infrav1.MetalCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc)).To(Succeed())
		g.Expect(mc.Finalizers).To(ContainElement(infrav1.MetalClusterFinalizer))
		hosts := &metal3v1.BareMetalHostList{}
		g.Expect(env.Client.List(ctx, hosts)).To(Succeed())
		g.Expect(hosts.Items).NotTo(BeEmpty())
		for _, h := range hosts.Items {
			if h.Name != availableHost {
				g.Expect(h.Status.ErrorType).NotTo(BeEmpty(), "%s/%s: its BMC does not answer", h.Namespace, h.Name)
			}
		}
	})
	wait("agent: the InfraEnv, the install and the labelled host taken", func(g Gomega) {
		ie := &agentinstallv1.InfraEnv{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: agents, Name: "rbac"}, ie)).To(Succeed())
		g.Expect(ie.Finalizers).To(ContainElement(infraenv.Finalizer))
		g.Expect(ie.Status.Conditions).NotTo(BeEmpty())
		aci := &hiveextv1.AgentClusterInstall{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: agents, Name: "rbac"}, aci)).To(Succeed())
		g.Expect(aci.Status.Conditions).NotTo(BeEmpty())
		host := &metal3v1.BareMetalHost{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: agents, Name: "ztp"}, host)).To(Succeed())
		g.Expect(host.Finalizers).To(ContainElement(bmac.Finalizer))
	})
	stop()
	g.Expect(refused()).To(BeEmpty(), "a role lacks a permission")

	// What a compromised provider pod must not do.
	ctx = context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range providers.All() {
		if p.Label() == "cluster-api" {
			continue // upstream's role
		}
		user := providertest.User(p)
		for _, a := range []authorizationv1.ResourceAttributes{
			{Namespace: ns, Verb: "create", Resource: "pods"},
			{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"},
			{Namespace: p.Namespace(), Verb: "create", Group: "apps", Resource: "deployments"},
			{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token"},
			{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
			{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			{Verb: "impersonate", Resource: "users"},
			{Verb: "impersonate", Resource: "serviceaccounts"},
			{Verb: "get", Resource: "nodes", Subresource: "proxy"},
			{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
			{Verb: "update", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
			{Namespace: ns, Verb: "update", Group: "coordination.k8s.io", Resource: "leases"},
		} {
			g.Expect(allowed(ctx, g, cs, user, a)).To(BeFalse(), "%s may not %s %s/%s %s in %q", p.Label(), a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace)
		}
		var secretVerbs []string // TestLeastPrivilege holds them to what the provider needs
		if !p.Unprivileged {
			rbac, err := config.GeneratedRBAC(p.Label())
			g.Expect(err).NotTo(HaveOccurred())
			for _, rule := range rbac.ClusterRules {
				if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
					secretVerbs = append(secretVerbs, rule.Verbs...)
				}
			}
		}
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			want := slices.Contains(secretVerbs, verb)
			g.Expect(allowed(ctx, g, cs, user, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets"})).
				To(Equal(want), "%s: %s Secrets", p.Label(), verb)
		}
	}
	operatorRBAC(ctx, g, env.Client, cs, ns)
}

// operatorRBAC: the bare-metal operator's generated roles, bound to a
// ServiceAccount, let it write Deployments and Secrets in
// openshift-machine-api and nowhere else; the release payload's role grants
// its ServiceAccount every rule the operator's markers ask for.
func operatorRBAC(ctx context.Context, g *WithT, c client.Client, cs kubernetes.Interface, tenant string) {
	rbac, err := config.GeneratedRBAC("baremetal-operator")
	g.Expect(err).NotTo(HaveOccurred())
	const ns, sa = "openshift-machine-api", "generated-operator"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: sa}
	}
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rbac.ClusterRules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa}, RoleRef: ref("ClusterRole"), Subjects: subjects},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}, Rules: rbac.Namespaced[ns]},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}, RoleRef: ref("Role"), Subjects: subjects},
	} {
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}
	user := "system:serviceaccount:" + ns + ":" + sa
	// The API server's authorizer reads roles and bindings from its own
	// cache: a grant counts once that cache has the objects just created.
	first := rbac.ClusterRules[0]
	resource, sub, _ := strings.Cut(first.Resources[0], "/")
	g.Eventually(func() bool {
		return allowed(ctx, g, cs, user, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"}) &&
			allowed(ctx, g, cs, user, authorizationv1.ResourceAttributes{Verb: first.Verbs[0], Group: first.APIGroups[0], Resource: resource, Subresource: sub})
	}).Should(BeTrue(), "the operator's role and binding took effect")
	for _, where := range []string{ns, tenant} {
		for _, a := range []authorizationv1.ResourceAttributes{
			{Namespace: where, Verb: "create", Group: "apps", Resource: "deployments"},
			{Namespace: where, Verb: "create", Resource: "secrets"},
		} {
			g.Expect(allowed(ctx, g, cs, user, a)).To(Equal(where == ns), "the operator: %s %s in %s", a.Verb, a.Resource, where)
		}
	}
	g.Expect(allowed(ctx, g, cs, user, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Resource: "secrets"})).To(BeFalse())

	// The payload's role covers the generated one.
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(operatormanifests.YAML)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		var meta struct{ Kind string }
		g.Expect(yaml.Unmarshal(doc, &meta)).To(Succeed())
		var o client.Object
		switch meta.Kind {
		case "ClusterRole":
			o = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			o = &rbacv1.ClusterRoleBinding{}
		default:
			continue
		}
		g.Expect(yaml.Unmarshal(doc, o)).To(Succeed())
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}
	payload := "system:serviceaccount:" + ns + ":cluster-baremetal-operator"
	// As above: the payload's grants count once the authorizer's cache has them.
	g.Eventually(func() bool {
		return allowed(ctx, g, cs, payload, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"})
	}).Should(BeTrue(), "the payload's role and binding took effect")
	check := func(where string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					resource, sub, _ := strings.Cut(res, "/")
					for _, verb := range rule.Verbs {
						a := authorizationv1.ResourceAttributes{Namespace: where, Verb: verb, Group: group, Resource: resource, Subresource: sub}
						g.Expect(allowed(ctx, g, cs, payload, a)).To(BeTrue(), "the payload's role grants %s %s/%s in %q", verb, group, res, where)
					}
				}
			}
		}
	}
	check("", rbac.ClusterRules)
	check(ns, rbac.Namespaced[ns])
}

// allowed asks the API server whether user (a ServiceAccount) may do a.
func allowed(ctx context.Context, g *WithT, cs kubernetes.Interface, user string, a authorizationv1.ResourceAttributes) bool {
	parts := strings.Split(user, ":")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"},
		ResourceAttributes: &a,
	}}
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return sar.Status.Allowed
}

// variable is a clusterctl variable, ${NAME} or ${NAME:=default}.
var variable = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:=([^}]*))?\}`)

// variables are the test's values of the required clusterctl variables.
var variables = map[string]string{
	"METALSHIFT_DEPLOY_HOST":        "deploy.test",
	"METALSHIFT_IGNITION_HOST":      "ignition.test",
	"METALSHIFT_AGENT_SERVICE_HOST": "agent.test",
}

// managerArgs are the arguments of the provider's Deployment, for a
// manager in this process: the variables set, the Lease in the provider's
// namespace, the signing key from key, no webhooks (the test environment
// serves them), health and metrics endpoints or live images, the servers'
// certificates issued by a CA of the test's for their host names, and
// servers on free loopback ports.
func managerArgs(t *testing.T, p providers.Provider, key string) []string {
	t.Helper()
	g := NewWithT(t)
	tlsDir := serverCertificates(t, p)
	yml, err := p.ComponentsYAML(providers.Options{Version: "v0.1.0"})
	g.Expect(err).NotTo(HaveOccurred())
	yml = variable.ReplaceAllFunc(yml, func(m []byte) []byte {
		sub := variable.FindSubmatch(m)
		if v, ok := variables[string(sub[1])]; ok {
			return []byte(v)
		}
		g.Expect(sub[2]).NotTo(BeEmpty(), "the test sets required variable %s", sub[1])
		return sub[3]
	})
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(yml)))
	for {
		doc, err := r.Read()
		g.Expect(err).NotTo(HaveOccurred(), "the components have a Deployment")
		var meta struct{ Kind string }
		g.Expect(yaml.Unmarshal(doc, &meta)).To(Succeed())
		if meta.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		g.Expect(yaml.Unmarshal(doc, d)).To(Succeed())
		var args []string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			flag, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			switch {
			case flag == "leader-election-namespace":
				a = "--" + flag + "=" + p.Namespace()
			case flag == "health-addr", flag == "metrics-bind-address", flag == "webhook-port":
				a = "--" + flag + "=0"
			case flag == "signing-key-file":
				a = "--" + flag + "=" + key
			case strings.HasSuffix(flag, "-listen-address"):
				a = "--" + flag + "=127.0.0.1:0"
			case flag == "webhook-cert-dir", flag == "live-image-dir":
				continue
			case strings.HasSuffix(flag, "-file") && strings.Contains(a, "="+providers.TLSDir+"/"):
				a = strings.Replace(a, "="+providers.TLSDir, "="+tlsDir, 1)
			}
			g.Expect(a).NotTo(ContainSubstring("$("), "every $(VAR) replaced")
			args = append(args, a)
		}
		return args
	}
}

// serverCertificates writes, for each server of p and its console, what cert-manager
// issues into its certificate Secret (tls.crt, tls.key, ca.crt) into
// <dir>/<server name>, and returns dir: certificates for the servers'
// host names from one CA, as the machine CA Issuer issues them.
func serverCertificates(t *testing.T, p providers.Provider) string {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	ca, err := certs.NewCA("machine-ca")
	g.Expect(err).NotTo(HaveOccurred())
	hosts := map[string]string{} // server name → host name
	for _, s := range p.Servers {
		hosts[s.Name] = variables[s.HostVariable()]
	}
	if p.ConsolePort != 0 {
		hosts[providers.Console] = "console.test"
	}
	for name, host := range hosts {
		kp, err := certs.Issue(ca, certs.Spec{CommonName: name, DNSNames: []string{host}, Server: true})
		g.Expect(err).NotTo(HaveOccurred())
		d := filepath.Join(dir, name)
		g.Expect(os.MkdirAll(d, 0o700)).To(Succeed())
		for name, data := range map[string][]byte{"tls.crt": kp.Cert, "tls.key": kp.Key, "ca.crt": ca.Cert} {
			g.Expect(os.WriteFile(filepath.Join(d, name), data, 0o600)).To(Succeed())
		}
	}
	return dir
}

// applyInstall creates what `metalshift create cluster` applies for a
// compact cluster whose hosts' BMCs do not answer, and returns its name
// (also its namespace).
func applyInstall(ctx context.Context, g *WithT, c client.Client) string {
	const name = "rbac"
	ic := &installconfig.InstallConfig{
		APIVersion: "v1", BaseDomain: "example.com", Metadata: installconfig.Metadata{Name: name},
		ControlPlane: installconfig.MachinePool{Name: "master", Replicas: ptr.To[int32](3)},
		Platform:     installconfig.Platform{BareMetal: &installconfig.BareMetal{APIVIPs: []string{"127.211.0.7"}}},
		PullSecret:   `{"auths":{}}`,
		Metalshift:   &installconfig.Metalshift{OSImage: installconfig.OSImage{URL: "http://images/rhcos.raw", Checksum: "abc"}},
	}
	for i := range 4 {
		ic.Platform.BareMetal.Hosts = append(ic.Platform.BareMetal.Hosts, installconfig.Host{
			Name: fmt.Sprintf("h%d", i), BootMACAddress: fmt.Sprintf("52:54:00:dd:00:%02x", i),
			BMC: installconfig.BMC{Address: "redfish+http://127.0.0.1:1/redfish/v1/Systems/1", Username: "u", Password: "p"},
		})
	}
	g.Expect(ic.Validate()).To(BeEmpty())
	raw, err := yaml.Marshal(ic)
	g.Expect(err).NotTo(HaveOccurred())
	ca, err := certs.NewCA("root-ca")
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.211.0.7:6443\n" +
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n")
	objs, err := installer.HubObjects(ic, raw, ca, kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetName() == availableHost && o.GetObjectKind().GroupVersionKind().Kind == "BareMetalHost" {
			o.SetAnnotations(map[string]string{metal3v1.PausedAnnotation: "rbac-test"})
		}
		g.Expect(c.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	// The host the host engine has (had) ready, which the bootstrap
	// Machine's MetalMachine claims: paused, so that the engine leaves it
	// to the test.
	host := &metal3v1.BareMetalHost{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: name, Name: availableHost}, host)).To(Succeed())
	host.Status.Provisioning.State, host.Status.OperationalStatus = metal3v1.StateAvailable, metal3v1.OperationalStatusOK
	g.Expect(c.Status().Update(ctx, host)).To(Succeed())
	return name
}

// availableHost is the install's host the test makes available.
const availableHost = "h0"

// applyAgentInstall creates, in a namespace of its own, an agent-based
// install (a ClusterDeployment, its AgentClusterInstall, an InfraEnv, the
// pull secret, the cluster-wide ClusterImageSet and AgentServiceConfig) and
// a BareMetalHost labelled for the InfraEnv (whose Agent and Node go with
// it, so that BMAC holds it with a finalizer), and returns the namespace.
func applyAgentInstall(ctx context.Context, g *WithT, c client.Client) string {
	const ns, name = "agents", "rbac"
	meta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n, Namespace: ns} }
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: "openshift-v4.16.3"},
			Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}},
		&agentinstallv1.AgentServiceConfig{ObjectMeta: metav1.ObjectMeta{Name: agentinstallv1.AgentServiceConfigName}},
		&corev1.Secret{ObjectMeta: meta("pull-secret"), Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"c2ltOnNpbQ=="}}}`)}},
		&hivev1.ClusterDeployment{ObjectMeta: meta(name), Spec: hivev1.ClusterDeploymentSpec{
			ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
				Kind: "AgentClusterInstall", Name: name},
			Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
		}},
		&hiveextv1.AgentClusterInstall{ObjectMeta: meta(name), Spec: hiveextv1.AgentClusterInstallSpec{
			ImageSetRef:          &hivev1.ClusterImageSetReference{Name: "openshift-v4.16.3"},
			ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
			Networking: hiveextv1.Networking{
				ClusterNetwork:        []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
				ServiceNetwork:        []string{"172.30.0.0/16"},
				UserManagedNetworking: ptr.To(true),
			},
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 1},
			SSHPublicKey:          "ssh-ed25519 AAAA user@host",
		}},
		&agentinstallv1.InfraEnv{ObjectMeta: meta(name), Spec: agentinstallv1.InfraEnvSpec{
			PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, SSHAuthorizedKey: "ssh-ed25519 AAAA user@host",
			ClusterRef: &agentinstallv1.ClusterReference{Name: name, Namespace: ns},
		}},
		&corev1.Secret{ObjectMeta: meta("ztp-bmc"), StringData: map[string]string{"username": "u", "password": "p"}},
		&metal3v1.BareMetalHost{
			ObjectMeta: metav1.ObjectMeta{Name: "ztp", Namespace: ns, Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: name},
				Annotations: map[string]string{bmac.RemoveAgentAndNodeOnDeleteAnnotation: "true"}},
			Spec: metal3v1.BareMetalHostSpec{
				BMC:            metal3v1.BMCDetails{Address: "redfish+http://127.0.0.1:1/redfish/v1/Systems/1", CredentialsName: "ztp-bmc"},
				BootMACAddress: "52:54:00:dd:01:00", Online: true,
			},
		},
	} {
		g.Expect(c.Create(ctx, o)).To(Succeed(), "%T %s", o, o.GetName())
	}
	return ns
}

package providers

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/url"
	"path"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/manager"
)

// siteVariables are a site's values of the servers' host names.
var siteVariables = map[string]string{
	"METALSHIFT_DEPLOY_HOST":        "deploy.hub.example.com",
	"METALSHIFT_IGNITION_HOST":      "ignition.hub.example.com",
	"METALSHIFT_AGENT_SERVICE_HOST": "agent.hub.example.com",
}

// objectsWith parses the provider's components YAML with the variables
// vars set, the others at their defaults.
func objectsWith(t *testing.T, p Provider, vars map[string]string) []unstructured.Unstructured {
	t.Helper()
	yml, err := p.ComponentsYAML(Options{Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	yml = variable.ReplaceAllFunc(yml, func(m []byte) []byte {
		sub := variable.FindSubmatch(m)
		if v, ok := vars[string(sub[1])]; ok {
			return []byte(v)
		}
		if len(sub[2]) == 0 {
			t.Fatalf("%s: required variable %s not set by the test", p.Label(), sub[1])
		}
		return sub[3]
	})
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(yml)))
	var objs []unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		u := unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// rendered is what a provider's components say about its servers.
type rendered struct {
	deployment *appsv1.Deployment
	flags      *pflag.FlagSet
	services   map[string]*corev1.Service           // by name
	certs      map[string]unstructured.Unstructured // by Secret name
	issuers    map[string]unstructured.Unstructured // by name
	secrets    []string                             // Secrets in the components
	mounts     map[string]string                    // mount path → Secret
}

func render(t *testing.T, p Provider, vars map[string]string) rendered {
	t.Helper()
	r := rendered{services: map[string]*corev1.Service{}, certs: map[string]unstructured.Unstructured{},
		issuers: map[string]unstructured.Unstructured{}, mounts: map[string]string{}}
	for _, o := range objectsWith(t, p, vars) {
		switch o.GetKind() {
		case "Deployment":
			r.deployment = convert[appsv1.Deployment](t, o)
		case "Service":
			r.services[o.GetName()] = convert[corev1.Service](t, o)
		case "Certificate":
			secret, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
			r.certs[secret] = o
		case "Issuer":
			r.issuers[o.GetName()] = o
		case "Secret":
			r.secrets = append(r.secrets, o.GetName())
		}
	}
	if r.deployment == nil {
		t.Fatalf("%s has no Deployment", p.Label())
	}
	c := r.deployment.Spec.Template.Spec.Containers[0]
	r.flags = pflag.NewFlagSet("manager", pflag.ContinueOnError)
	component.BindFlags(r.flags, &component.Options{}, manager.Components())
	if err := r.flags.Parse(c.Args); err != nil {
		t.Fatal(err)
	}
	volumes := map[string]string{}
	for _, v := range r.deployment.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v.Secret.SecretName
	}
	for _, m := range c.VolumeMounts {
		r.mounts[m.MountPath] = volumes[m.Name]
	}
	return r
}

func (r rendered) flag(name string) string { return r.flags.Lookup(name).Value.String() }

// fileSecret is the Secret a flag's file is mounted from, and its key.
func (r rendered) fileSecret(flag string) (secret, key string) {
	f := r.flag(flag)
	return r.mounts[path.Dir(f)], path.Base(f)
}

// machineCAIssued is the issuer of the Certificate of secret when it is a
// CA Issuer of the machine CA; empty otherwise.
func (r rendered) machineCAIssued(secret string) string {
	c, ok := r.certs[secret]
	if !ok {
		return ""
	}
	kind, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "kind")
	name, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
	ca, _, _ := unstructured.NestedString(r.issuers[name].Object, "spec", "ca", "secretName")
	if kind != "Issuer" || ca != MachineCASecret {
		return ""
	}
	return name
}

func (r rendered) serviceTargeting(port string) *corev1.Service {
	for _, svc := range r.services {
		if svc.Spec.Ports[0].TargetPort.StrVal == port {
			return svc
		}
	}
	return nil
}

// TestServersServeHTTPS: no provider's Deployment serves plain http but
// the deploy server's boot listener; every server machines reach serves
// https with a certificate the machine CA signed for the host name of its
// URL, with that CA handed to machines, behind a Service on 443; the
// deploy server's boot listener is behind a Service of its own which
// machines reach only when a variable says so; the agent service hands
// converged-flow machines the deploy server's URL and the CA that signed
// it.
func TestServersServeHTTPS(t *testing.T) {
	byLabel := map[string]rendered{}
	for _, p := range All() {
		t.Run(p.Label(), func(t *testing.T) {
			g := NewWithT(t)
			r := render(t, p, siteVariables)
			byLabel[p.Label()] = r
			g.Expect(r.deployment.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(ContainSubstring("insecure-http")))
			g.Expect(r.secrets).To(BeEmpty(), "the site creates the signing key and the machine CA")
			g.Expect(r.mounts).NotTo(ContainElement(MachineCASecret), "the CA's key stays with cert-manager")
			for _, s := range p.Servers {
				host := siteVariables[s.HostVariable()]
				u, err := url.Parse(r.flag(s.Name + "-url"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(u.Scheme).To(Equal("https"))
				g.Expect(u.Hostname()).To(Equal(host))
				g.Expect(u.Port()).To(Equal("443"))

				for _, f := range []string{"cert", "key", "ca"} {
					secret, key := r.fileSecret(s.Name + "-" + f + "-file")
					g.Expect(secret).To(Equal(s.CertSecret()), "--%s-%s-file is in the certificate's Secret", s.Name, f)
					g.Expect(key).To(Equal(map[string]string{"cert": "tls.crt", "key": "tls.key", "ca": "ca.crt"}[f]))
				}
				g.Expect(r.machineCAIssued(s.CertSecret())).NotTo(BeEmpty(), "%s's certificate is issued by the machine CA", s.Name)
				names, _, _ := unstructured.NestedStringSlice(r.certs[s.CertSecret()].Object, "spec", "dnsNames")
				g.Expect(names).To(ConsistOf(host, s.Service()+"."+p.Namespace()+".svc"))

				svc := r.services[s.Service()]
				g.Expect(svc).NotTo(BeNil())
				g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
				g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Port", BeEquivalentTo(443))))
				g.Expect(svc.Spec.Ports[0].TargetPort.StrVal).To(Equal(s.Name))

				boot := r.flags.Lookup(s.Name + "-boot-listen-address")
				if s.BootPort == 0 {
					g.Expect(boot == nil || !boot.Changed).To(BeTrue(), "%s has no plain http listener", s.Name)
					continue
				}
				bootSvc := r.serviceTargeting(s.Name + "-boot")
				g.Expect(bootSvc).NotTo(BeNil())
				g.Expect(bootSvc.Name).NotTo(Equal(s.Service()), "the boot port is not exposed with the server's")
				g.Expect(bootSvc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP), "machines reach the boot port only when a variable says so")
				g.Expect(bootSvc.Spec.Ports).To(ConsistOf(HaveField("Port", BeEquivalentTo(80))))
				g.Expect(r.flag(s.Name + "-boot-url")).To(Equal("http://" + bootSvc.Name + "." + p.Namespace() + ".svc"))
			}
		})
	}

	// A site that network-boots exposes the boot Service.
	g := NewWithT(t)
	metal := All()[1]
	g.Expect(metal.Label()).To(Equal("infrastructure-metal"))
	vars := map[string]string{"METALSHIFT_DEPLOY_BOOT_SERVICE_TYPE": "LoadBalancer", "METALSHIFT_DEPLOY_BOOT_URL": "http://boot.hub.example.com"}
	for k, v := range siteVariables {
		vars[k] = v
	}
	r := render(t, metal, vars)
	g.Expect(r.serviceTargeting("deploy-boot").Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
	g.Expect(r.flag("deploy-boot-url")).To(Equal("http://boot.hub.example.com"))
	// Equinix Metal devices boot from the same listener.
	g.Expect(r.flag("equinix-boot-url")).To(Equal("http://boot.hub.example.com"))

	// Converged flow: the agent service's images carry the deploy server's
	// URL and the CA that signed its certificate, the machine CA, which is
	// the CA of the agent service's own certificate Secret.
	agent := byLabel["addon-agent"]
	metalR := byLabel["infrastructure-metal"]
	g.Expect(agent.flag("agent-service-deploy-url")).To(Equal(metalR.flag("deploy-url")))
	secret, key := agent.fileSecret("agent-service-deploy-ca-file")
	g.Expect(key).To(Equal("ca.crt"))
	g.Expect(agent.machineCAIssued(secret)).NotTo(BeEmpty(), "the deploy CA file is the machine CA's")
	g.Expect(metalR.machineCAIssued("metalshift-deploy-cert")).NotTo(BeEmpty())

	// Every provider with servers has the machine CA Issuer; the others none.
	for _, p := range All() {
		r := byLabel[p.Label()]
		_, ok := r.issuers[machineCAIssuer]
		g.Expect(ok).To(Equal(len(p.Servers) > 0), p.Label())
	}
}

// TestConsoleProvider: the console provider serves the web console over
// https with a certificate of its self-signed Issuer for the host people
// reach it at (by default the Service's name in the cluster), behind a
// ClusterIP Service that keeps a browser on the replica that holds its
// session; it serves no machine, has no ClusterRole and mounts no Secret
// but its certificate.
func TestConsoleProvider(t *testing.T) {
	g := NewWithT(t)
	var p Provider
	for _, q := range All() {
		if q.ConsolePort != 0 {
			g.Expect(p.Name).To(BeEmpty(), "one provider serves the console")
			p = q
		}
	}
	g.Expect(p.Label()).To(Equal("addon-console"))
	g.Expect(p.Servers).To(BeEmpty(), "machines reach nothing of the console's")

	for _, tc := range []struct {
		vars      map[string]string
		host      string
		typ       corev1.ServiceType
		described string
	}{
		{nil, ConsoleService + "." + p.Namespace() + ".svc", corev1.ServiceTypeClusterIP, "defaults"},
		{map[string]string{ConsoleHostVariable: "console.hub.example.com", "METALSHIFT_CONSOLE_SERVICE_TYPE": "LoadBalancer"},
			"console.hub.example.com", corev1.ServiceTypeLoadBalancer, "a site's host and Service type"},
	} {
		r := render(t, p, tc.vars)
		g.Expect(r.flag("console-listen-address")).To(Equal(":6200"), tc.described)
		g.Expect(r.flags.Lookup("console-insecure-http").Changed).To(BeFalse())
		for f, key := range map[string]string{"console-cert-file": "tls.crt", "console-key-file": "tls.key"} {
			secret, k := r.fileSecret(f)
			g.Expect(secret).To(Equal(ConsoleCertSecret), f)
			g.Expect(k).To(Equal(key), f)
		}
		g.Expect(r.mounts).To(HaveLen(1), "only the console's certificate is mounted")
		cert := r.certs[ConsoleCertSecret]
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		_, selfSigned, _ := unstructured.NestedMap(r.issuers[issuer].Object, "spec", "selfSigned")
		g.Expect(selfSigned).To(BeTrue(), "the console's certificate is self-signed, not the machine CA's")
		names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		g.Expect(names).To(ContainElements(tc.host, ConsoleService+"."+p.Namespace()+".svc"), tc.described)
		svc := r.services[ConsoleService]
		g.Expect(svc).NotTo(BeNil())
		g.Expect(r.services).To(HaveLen(1), "no webhook Service, no server Service")
		g.Expect(svc.Spec.Type).To(Equal(tc.typ), tc.described)
		g.Expect(svc.Spec.SessionAffinity).To(Equal(corev1.ServiceAffinityClientIP), "a session lives in one replica")
		g.Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Port", BeEquivalentTo(443)), HaveField("TargetPort.StrVal", Console))))
		g.Expect(r.deployment.Spec.Template.Spec.Containers[0].Ports).To(ContainElement(And(HaveField("Name", Console), HaveField("ContainerPort", BeEquivalentTo(6200)))))
	}
	rbac, err := p.RBAC()
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range rbac {
		g.Expect(o.GetObjectKind().GroupVersionKind().Kind).NotTo(HavePrefix("Cluster"), "the console acts as each user, not as itself")
	}
}

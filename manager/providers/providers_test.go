package providers

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/contract"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/manager"
)

// variable matches a clusterctl variable: ${NAME} or ${NAME:=default}.
var variable = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:=([^}]*))?\}`)

// substitute replaces clusterctl variables by their defaults, or by "x"
// for the required ones, as clusterctl would with those values.
func substitute(yml []byte) []byte {
	return variable.ReplaceAllFunc(yml, func(m []byte) []byte {
		if sub := variable.FindSubmatch(m); len(sub[2]) > 0 {
			return sub[3]
		}
		return []byte("x")
	})
}

// objects parses the provider's components YAML, variables substituted.
func objects(t *testing.T, p Provider) []unstructured.Unstructured {
	t.Helper()
	yml, err := p.ComponentsYAML(Options{Version: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(substitute(yml))))
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

func convert[T any](t *testing.T, u unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// bootImageComponents are the components whose servers hand out the images
// machines boot (imageservice.LoadImages reads --live-image-dir): the host
// engine's deploy server and the agent service.
var bootImageComponents = map[string]bool{"host-engine": true, "agent-install": true}

// TestProviders: each provider's components are what clusterctl requires
// and what the manager runs: the Deployment's arguments are the manager's
// flags and select the provider's components, whose CRDs and webhooks the
// provider carries, each CRD and webhook in exactly one provider.
func TestProviders(t *testing.T) {
	crdOwner, webhookOwner := map[string]string{}, map[string]string{}
	for _, p := range All() {
		t.Run(p.Label(), func(t *testing.T) {
			g := NewWithT(t)
			objs := objects(t, p)
			byKind := map[string][]unstructured.Unstructured{}
			for _, o := range objs {
				byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
			}
			// One namespace, which every namespaced object is in.
			g.Expect(byKind["Namespace"]).To(HaveLen(1))
			ns := byKind["Namespace"][0].GetName()
			g.Expect(ns).To(Equal(p.Namespace()))
			for _, o := range objs {
				switch o.GetKind() {
				case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
					g.Expect(o.GetNamespace()).To(BeEmpty(), "%s %s is cluster-scoped", o.GetKind(), o.GetName())
				default:
					g.Expect(o.GetNamespace()).To(Equal(ns), "%s %s", o.GetKind(), o.GetName())
				}
			}
			certs := map[string]bool{}
			secrets := map[string]bool{SigningKeySecret: true}
			for _, c := range byKind["Certificate"] {
				certs[ns+"/"+c.GetName()] = true
				secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
				secrets[secret] = true
			}

			// The CRDs of the provider's components, named as clusterctl
			// requires, labelled with the contract, converted by the webhook.
			comps, err := component.Select(manager.Components(), p.Components)
			g.Expect(err).NotTo(HaveOccurred())
			want, err := component.CRDs(comps)
			g.Expect(err).NotTo(HaveOccurred())
			var wantNames, names []string
			for _, crd := range want {
				wantNames = append(wantNames, crd.Name)
			}
			conversion := false
			for _, o := range byKind["CustomResourceDefinition"] {
				crd := convert[apiextensionsv1.CustomResourceDefinition](t, o)
				names = append(names, crd.Name)
				g.Expect(crdOwner).NotTo(HaveKey(crd.Name), "%s is in %s too", crd.Name, crdOwner[crd.Name])
				crdOwner[crd.Name] = p.Label()
				g.Expect(crd.Name).To(Equal(contract.CalculateCRDName(crd.Spec.Group, crd.Spec.Names.Kind)))
				if p.Type != clusterctlv1.CoreProviderType {
					g.Expect(crd.Labels).To(HaveKey("cluster.x-k8s.io/v1beta2"), crd.Name)
				}
				if len(crd.Spec.Versions) > 1 {
					conversion = true
					g.Expect(crd.Annotations).To(HaveKeyWithValue(InjectCAAnnotation, BeKeyOf(certs)), crd.Name)
					g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.Service).To(HaveField("Name", WebhookService))
				}
			}
			g.Expect(names).To(ConsistOf(wantNames))

			// Webhook configurations name the provider's Service and a
			// Certificate of its own.
			var paths []string
			for _, o := range append(byKind["MutatingWebhookConfiguration"], byKind["ValidatingWebhookConfiguration"]...) {
				g.Expect(o.GetAnnotations()).To(HaveKeyWithValue(InjectCAAnnotation, BeKeyOf(certs)), o.GetName())
				g.Expect(o.GetName()).To(HavePrefix("metalshift-" + p.Label()))
				hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
				for _, h := range hooks {
					svc, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
					g.Expect(svc).To(HaveKeyWithValue("name", WebhookService))
					g.Expect(svc).To(HaveKeyWithValue("namespace", ns))
					name := h.(map[string]any)["name"].(string)
					g.Expect(webhookOwner).NotTo(HaveKey(name), "%s is in %s too", name, webhookOwner[name])
					webhookOwner[name] = p.Label()
					paths = append(paths, svc["path"])
				}
			}

			// The Deployment: the manager's flags, the provider's components.
			g.Expect(byKind["Deployment"]).To(HaveLen(1))
			d := convert[appsv1.Deployment](t, byKind["Deployment"][0])
			g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2), "the default of $METALSHIFT_REPLICAS")
			g.Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal(ServiceAccountName))
			g.Expect(d.Spec.Selector.MatchLabels).To(Equal(d.Spec.Template.Labels))
			c := d.Spec.Template.Spec.Containers[0]
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			opts := component.Options{}
			component.BindFlags(fs, &opts, manager.Components())
			g.Expect(fs.Parse(c.Args)).To(Succeed(), "every argument is a flag of the manager")
			g.Expect(opts.Components).To(Equal(p.Components))
			g.Expect(opts.LeaderElection).To(BeTrue())
			g.Expect(opts.LeaderElectionNamespace).To(Equal("$(POD_NAMESPACE)"))
			g.Expect(c.Env).To(ContainElement(HaveField("Name", "POD_NAMESPACE")))
			webhooks := len(paths) > 0 || conversion
			if webhooks {
				g.Expect(opts.WebhookPort).To(BeEquivalentTo(WebhookPort))
				g.Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", opts.WebhookCertDir)))
				g.Expect(byKind["Service"]).To(ContainElement(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("name", WebhookService)))))
			} else {
				g.Expect(opts.WebhookPort).To(BeZero(), "no webhooks: none served")
			}
			if p.SigningKey() {
				g.Expect(opts.SigningKeyFile).To(Equal(SigningKeyDir + "/key"))
			}
			// The components whose servers hand out boot images serve the
			// live images in the manager's image; the others are given none.
			if slices.ContainsFunc(p.Components, func(c string) bool { return bootImageComponents[c] }) {
				g.Expect(opts.LiveImageDir).To(Equal(manager.ImageLiveDir))
			} else {
				g.Expect(fs.Lookup("live-image-dir").Changed).To(BeFalse())
			}
			g.Expect(c.Image).To(Equal(manager.ImageRepository+":v0.1.0"), "the image `make images VERSION=v0.1.0` tags")
			ports := map[string]bool{}
			for _, port := range c.Ports {
				ports[port.Name] = true
			}
			g.Expect(c.LivenessProbe.HTTPGet.Port.StrVal).To(BeKeyOf(ports))
			g.Expect(opts.HealthAddr).To(Equal(":9440"))
			for _, v := range d.Spec.Template.Spec.Volumes {
				g.Expect(v.Secret.SecretName).To(BeKeyOf(secrets), "a volume's Secret is a certificate's or the signing key")
			}
			// Every server listens, behind a Service whose port the container has.
			for _, s := range p.Servers {
				g.Expect(fs.Lookup(s.Name+"-listen-address").Changed).To(BeTrue(), s.Name)
			}
			for _, o := range byKind["Service"] {
				svc := convert[corev1.Service](t, o)
				g.Expect(svc.Spec.Selector).To(Equal(d.Spec.Template.Labels))
				g.Expect(svc.Spec.Ports[0].TargetPort.StrVal).To(BeKeyOf(ports), svc.Name)
			}
		})
	}

	// Every CRD the hub serves is in a provider (config.openshift.io is the
	// installed cluster's API), every webhook too.
	g := NewWithT(t)
	shipped, err := config.CRDs(config.OwnCRDs, config.CAPICRDs)
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range shipped {
		if crd.Spec.Group != configv1.GroupVersion.Group {
			g.Expect(crdOwner).To(HaveKey(crd.Name))
		}
	}
	for _, read := range []func() ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error){config.OwnWebhooks, config.CAPIWebhooks} {
		mutating, validating, err := read()
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range mutating {
			for _, w := range m.Webhooks {
				g.Expect(webhookOwner).To(HaveKey(w.Name))
			}
		}
		for _, v := range validating {
			for _, w := range v.Webhooks {
				g.Expect(webhookOwner).To(HaveKey(w.Name))
			}
		}
	}
}

// TestWriteRepository: the local repository's layout, as clusterctl
// reads it, and metadata.yaml's contract.
func TestWriteRepository(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(WriteRepository(dir, Options{Version: "v1.2.3", Image: "registry.example/manager:x"})).To(Succeed())
	cfg, err := os.ReadFile(filepath.Join(dir, "clusterctl.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range All() {
		f := filepath.Join(dir, p.Label(), "v1.2.3", p.ComponentsFile())
		g.Expect(string(cfg)).To(ContainSubstring("url: file://" + f))
		yml, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(yml)).To(ContainSubstring("image: registry.example/manager:x"))
		data, err := os.ReadFile(filepath.Join(dir, p.Label(), "v1.2.3", "metadata.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		m := clusterctlv1.Metadata{}
		g.Expect(yaml.UnmarshalStrict(data, &m)).To(Succeed())
		g.Expect(m.Kind).To(Equal("Metadata"))
		g.Expect(m.APIVersion).To(Equal("clusterctl.cluster.x-k8s.io/v1alpha3"))
		g.Expect(m.ReleaseSeries).To(ConsistOf(clusterctlv1.ReleaseSeries{Major: 1, Minor: 2, Contract: "v1beta2"}))
	}
	g.Expect(WriteRepository(dir, Options{Version: "1.2"})).To(MatchError(ContainSubstring("want a semantic version")))

	// A newer version's metadata names the older ones' series: clusterctl
	// upgrades only from a version the newest metadata knows.
	g.Expect(WriteRepository(dir, Options{Version: "v1.3.0"})).To(Succeed())
	for _, p := range All() {
		data, err := os.ReadFile(filepath.Join(dir, p.Label(), "v1.3.0", "metadata.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		m := clusterctlv1.Metadata{}
		g.Expect(yaml.UnmarshalStrict(data, &m)).To(Succeed())
		g.Expect(m.ReleaseSeries).To(Equal([]clusterctlv1.ReleaseSeries{{Major: 1, Minor: 2, Contract: "v1beta2"}, {Major: 1, Minor: 3, Contract: "v1beta2"}}))
	}
	yml, err := All()[0].ComponentsYAML(Options{Version: "v1.2.3"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(yml)).To(ContainSubstring("image: ghcr.io/metalshift/manager:v1.2.3"))
}

// TestVariablesDocumented: every clusterctl variable of the components is
// explained in docs/production.md.
func TestVariablesDocumented(t *testing.T) {
	g := NewWithT(t)
	doc, err := os.ReadFile("../../docs/production.md")
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, p := range All() {
		yml, err := p.ComponentsYAML(Options{Version: "v0.1.0"})
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range variable.FindAllSubmatch(yml, -1) {
			if n := string(m[1]); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	g.Expect(names).To(ContainElements("METALSHIFT_REPLICAS", "METALSHIFT_DEPLOY_HOST", "METALSHIFT_DEPLOY_BOOT_SERVICE_TYPE"))
	for _, n := range names {
		g.Expect(strings.Contains(string(doc), "`"+n+"`")).To(BeTrue(), "docs/production.md explains %s", n)
	}
}

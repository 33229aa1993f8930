package manager

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/config"
)

// TestFlags: the manager's command line keeps its flag names and defaults
// (docs, `hub up --controllers=false` and the e2e tests use them), whichever
// component declares each.
func TestFlags(t *testing.T) {
	g := NewWithT(t)
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	component.BindFlags(fs, &component.Options{}, Components())
	defaults := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) { defaults[f.Name] = f.DefValue })
	g.Expect(defaults).To(Equal(map[string]string{
		"namespace": "", "watch-filter": "",
		"webhook-host": "", "webhook-port": "9443", "webhook-cert-dir": "/tmp/k8s-webhook-server/serving-certs",
		"webhook-cert-name": "tls.crt", "webhook-key-name": "tls.key",
		"metrics-bind-address": ":8080", "health-addr": ":9440",
		"leader-elect": "false", "leader-election-namespace": "",
		"components": "[]", "signing-key-file": "", "workload-connection-retry-interval": "0s",
		"deploy-listen-address": "", "deploy-url": "", "live-image-dir": "", "bmc-allow-loopback": "false", "bmc-allowed-networks": "[]",
		"deploy-cert-file": "", "deploy-key-file": "", "deploy-ca-file": "", "deploy-insecure-http": "false",
		"deploy-boot-listen-address": "", "deploy-boot-url": "",
		"ignition-listen-address": "", "ignition-url": "", "ignition-cert-file": "", "ignition-key-file": "", "ignition-ca-file": "",
		"ignition-insecure-http": "false", "max-user-data-bytes": "0", "ignition-token-ttl": "4h0m0s", "ignition-fetch-window": "30m0s",
		"agent-service-listen-address": "", "agent-service-url": "", "agent-poll-interval": "0s",
		"agent-service-cert-file": "", "agent-service-key-file": "", "agent-service-ca-file": "", "agent-service-insecure-http": "false",
		"allow-converged-flow": "true", "agent-service-deploy-url": "", "agent-service-deploy-ca-file": "",
		"agent-installation-timeout": "0s", "agent-host-stage-timeouts": "[]",
		"equinix-boot-url":       "",
		"console-listen-address": "", "console-cert-file": "", "console-key-file": "", "console-insecure-http": "false", "console-session-ttl": "8h0m0s",
		"baremetal-operator": "false", "baremetal-operator-version": "0.0.1-snapshot", "baremetal-operator-operand-image": "metalshift/manager:latest",
	}))
}

// TestComponents: names are unique, every type a component serves is in
// its own scheme, and every CRD shipped in config is served by exactly one
// component, except the installed cluster's config.openshift.io API.
func TestComponents(t *testing.T) {
	g := NewWithT(t)
	names := map[string]bool{}
	servedBy := map[string]string{}
	for _, c := range Components() {
		g.Expect(names).NotTo(HaveKey(c.Name), "component names are unique")
		names[c.Name] = true
		g.Expect(c.Setup).NotTo(BeNil(), c.Name)
		scheme, err := component.NewScheme(c)
		g.Expect(err).NotTo(HaveOccurred())
		crds, err := component.CRDs([]component.Component{c})
		g.Expect(err).NotTo(HaveOccurred(), c.Name)
		for _, crd := range crds {
			g.Expect(servedBy).NotTo(HaveKey(crd.Name), "%s is served by %s and %s", crd.Name, servedBy[crd.Name], c.Name)
			servedBy[crd.Name] = c.Name
			for _, v := range crd.Spec.Versions {
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
				g.Expect(scheme.Recognizes(gvk)).To(BeTrue(), "%s serves %s: its scheme must know it", c.Name, gvk)
			}
		}
	}
	shipped, err := config.CRDs(config.OwnCRDs, config.CAPICRDs)
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range shipped {
		if crd.Spec.Group == configv1.GroupVersion.Group {
			g.Expect(servedBy).NotTo(HaveKey(crd.Name), "the installed cluster's API is not the hub's")
			continue
		}
		g.Expect(servedBy).To(HaveKey(crd.Name), "no component serves %s", crd.Name)
	}
}

// TestComponentsAlone: a component run alone (a clusterctl provider's
// Deployment runs some of them, --components) knows the kinds of other
// components it reads or writes: the control plane creates OpenShiftConfigs,
// the metal provider claims BareMetalHosts, the agent service pairs them
// with Agents, the operator reads the installed cluster's Infrastructure.
func TestComponentsAlone(t *testing.T) {
	g := NewWithT(t)
	uses := map[string][]schema.GroupVersionKind{
		"controlplane-openshift": {bootstrapv1.GroupVersion.WithKind("OpenShiftConfig"), configv1.GroupVersion.WithKind("ClusterVersion")},
		"infrastructure-metal":   {metal3v1.GroupVersion.WithKind("BareMetalHost")},
		"agent-install":          {metal3v1.GroupVersion.WithKind("BareMetalHost")},
		"baremetal-operator":     {configv1.GroupVersion.WithKind("Infrastructure")},
	}
	for _, c := range Components() {
		scheme, err := component.NewScheme(c)
		g.Expect(err).NotTo(HaveOccurred())
		for _, gvk := range uses[c.Name] {
			g.Expect(scheme.Recognizes(gvk)).To(BeTrue(), "%s alone must know %s", c.Name, gvk)
		}
		delete(uses, c.Name)
	}
	g.Expect(uses).To(BeEmpty(), "no such components")
}

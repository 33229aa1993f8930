package providers

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/manager"
)

// secretVerbs are the verbs on Secrets each provider may have, and why.
// Every provider reads Secrets in the namespaces of the clusters it serves
// (there is no narrower read: names are predictable); what differs is
// whether it may watch them, write them, delete them.
var secretVerbs = map[string][]string{
	// The host engine reads BMC credentials and network data, and watches
	// every Secret's metadata so that a fixed credentials Secret wakes its
	// hosts; a MetalMachine writes its host's user data Secret, which the
	// garbage collector deletes with it.
	"infrastructure-metal": {"get", "list", "watch", "create", "update"},
	// Reads the install-config, install state, cluster CA and the manifest
	// Secrets a label selects; writes the bootstrap data Secrets it owns.
	// Never watches, never deletes.
	"bootstrap-openshift": {"get", "list", "create", "update"},
	// The ClusterCache caches the Secrets labelled with a cluster name (the
	// kubeconfigs); writes the cluster's CA and kubeconfig Secrets and the
	// bootstrap node's install-config, which it deletes once the bootstrap
	// node is gone.
	"control-plane-openshift": {"get", "list", "watch", "create", "update", "delete"},
	// Reads pull secrets, install states and imported kubeconfigs, from a
	// cache of the Secrets labelled agent-install.metalshift.io/cached
	// (list and watch, selected by that label); labels a Secret it read
	// from the API (patch); writes the install state and the installed
	// cluster's kubeconfig and password; deletes the install state when
	// its install goes.
	"addon-agent": {"get", "list", "watch", "create", "update", "patch", "delete"},
}

// allowedGroups are the API groups a provider's rules may name: the
// clusters' and hosts' APIs, Events and, in its own namespace, Leases.
// Anything else (RBAC, workloads, admission, CRDs, certificates, nodes)
// needs a reason and a change here.
var allowedGroups = []string{
	"", "events.k8s.io", "coordination.k8s.io",
	"cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io",
	"metal3.io", "agent-install.openshift.io", "hive.openshift.io", "extensions.hive.openshift.io", "config.openshift.io",
}

// coreResources are the resources of the core group ("") a provider may
// name, with the verbs allowed on each; Secrets are per provider.
var coreResources = map[string][]string{
	"configmaps": {"get", "list", "watch"},
	"events":     {"create", "patch", "list"},
}

// providerRBAC is what a provider's components YAML grants.
type providerRBAC struct {
	clusterRoles []rbacv1.ClusterRole
	roles        []rbacv1.Role
	bindings     [][]rbacv1.Subject
}

func renderedRBAC(t *testing.T, p Provider) providerRBAC {
	var r providerRBAC
	for _, o := range objects(t, p) {
		switch o.GetKind() {
		case "ClusterRole":
			r.clusterRoles = append(r.clusterRoles, *convert[rbacv1.ClusterRole](t, o))
		case "Role":
			r.roles = append(r.roles, *convert[rbacv1.Role](t, o))
		case "ClusterRoleBinding":
			r.bindings = append(r.bindings, convert[rbacv1.ClusterRoleBinding](t, o).Subjects)
		case "RoleBinding":
			r.bindings = append(r.bindings, convert[rbacv1.RoleBinding](t, o).Subjects)
		}
	}
	return r
}

// TestLeastPrivilege fails when a provider's role grows a dangerous rule:
// a wildcard, a verb that escalates (escalate, bind, impersonate), a group
// or core resource outside allowedGroups / coreResources (RBAC, Pods,
// Deployments, ServiceAccount tokens, Nodes: what turns a compromised pod
// into cluster-admin), more Secret verbs than secretVerbs allows, or
// Leases outside its own namespace. The core provider is exempt: its role
// is upstream Cluster API's, unmodified, and its pods serve no machine.
// None of the others may create Pods or Deployments anywhere; only the
// bare-metal operator, which is no clusterctl provider, writes a
// Deployment (its operand, metal3), and only in openshift-machine-api
// (TestOperatorRoleNamespaced).
func TestLeastPrivilege(t *testing.T) {
	for _, p := range All() {
		if p.Type == clusterctlv1.CoreProviderType {
			continue
		}
		t.Run(p.Label(), func(t *testing.T) {
			g := NewWithT(t)
			r := renderedRBAC(t, p)
			g.Expect(r.roles).To(HaveLen(1), "only the leader-election Role")
			if p.Unprivileged {
				g.Expect(r.clusterRoles).To(BeEmpty(), "an unprivileged provider has no ClusterRole")
				g.Expect(r.bindings).To(HaveLen(1), "only the leader-election RoleBinding")
				return
			}
			g.Expect(r.clusterRoles).To(HaveLen(1))
			g.Expect(secretVerbs).To(HaveKey(p.Label()), "say which Secret verbs the provider needs, and why")
			for _, subjects := range r.bindings {
				g.Expect(subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName, Namespace: p.Namespace()}))
			}
			check := func(rule rbacv1.PolicyRule, namespaced bool) {
				g.Expect(rule.NonResourceURLs).To(BeEmpty(), "%v", rule)
				for _, f := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames} {
					g.Expect(f).NotTo(ContainElement(ContainSubstring("*")), "no wildcard: %v", rule)
				}
				g.Expect(rule.Verbs).NotTo(ContainElement(BeElementOf("escalate", "bind", "impersonate")), "%v", rule)
				for _, group := range rule.APIGroups {
					g.Expect(allowedGroups).To(ContainElement(group), "%v", rule)
					if group == "coordination.k8s.io" {
						g.Expect(namespaced).To(BeTrue(), "Leases only in the provider's namespace: %v", rule)
					}
					if group != "" {
						continue
					}
					for _, res := range rule.Resources {
						allowed, ok := coreResources[res]
						if res == "secrets" {
							allowed, ok = secretVerbs[p.Label()], true
						}
						g.Expect(ok).To(BeTrue(), "core resource %s: %v", res, rule)
						g.Expect(allowed).To(ContainElements(rule.Verbs), "%s: %v", res, rule)
					}
				}
			}
			for _, rule := range r.clusterRoles[0].Rules {
				check(rule, false)
			}
			for _, role := range r.roles {
				g.Expect(role.Namespace).To(Equal(p.Namespace()))
				for _, rule := range role.Rules {
					check(rule, true)
				}
			}
			// The Secret verbs are not only allowed but needed: a verb
			// dropped from the markers is dropped here too.
			var verbs []string
			for _, rule := range r.clusterRoles[0].Rules {
				if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
					verbs = append(verbs, rule.Verbs...)
				}
			}
			g.Expect(verbs).To(ConsistOf(secretVerbs[p.Label()]), "secretVerbs is up to date")
		})
	}
}

// TestOperatorRoleNamespaced: the bare-metal operator (not a clusterctl
// provider; a release payload runs it, clusterbaremetal/manifests) writes its
// operand's Deployment and Secrets (signing key, the deploy server's CA
// and certificate) in openshift-machine-api only, and has no other rule on
// workloads or Secrets; of the core group it reads Nodes only, whose
// addresses the deploy server's certificate holds.
func TestOperatorRoleNamespaced(t *testing.T) {
	g := NewWithT(t)
	rbac, err := config.GeneratedRBAC("baremetal-operator")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rbac.Namespaced).To(HaveLen(1))
	g.Expect(rbac.Namespaced).To(HaveKey("openshift-machine-api"))
	for _, rule := range rbac.ClusterRules {
		g.Expect(rule.APIGroups).NotTo(ContainElement("apps"), "%v", rule)
		if slices.Contains(rule.APIGroups, "") {
			g.Expect(rule.APIGroups).To(ConsistOf(""), "%v", rule)
			g.Expect(rule.Resources).To(ConsistOf("nodes"), "%v", rule)
			g.Expect(rule.Verbs).To(ConsistOf("get", "list", "watch"), "%v", rule)
		}
	}
	for _, rule := range rbac.Namespaced["openshift-machine-api"] {
		g.Expect(rule.Resources).To(ContainElement(BeElementOf("deployments", "secrets")), "%v", rule)
		if slices.Contains(rule.Resources, "secrets") {
			g.Expect(rule.Verbs).To(ConsistOf("get", "create", "update"),
				"created once (the signing key and the CA never change; the certificate is updated when it is issued again), never listed or deleted")
		}
	}
}

// generateLine matches the controller-gen run of `make generate` that
// writes a provider's role: its name, package paths and output directory.
var generateLine = regexp.MustCompile(`rbac:roleName=(\S+) paths="([^"]+)" output:rbac:artifacts:config=config/rbac/(\S+)`)

// componentPackages are the package trees of the manager's components.
var componentPackages = map[string]string{
	"host-engine": "hostengine", "infrastructure-metal": "infrastructure/metal", "baremetal-operator": "clusterbaremetal",
	"infrastructure-equinix": "infrastructure/equinix",
	"bootstrap-openshift":    "bootstrap", "controlplane-openshift": "controlplane", "agent-install": "assisted",
	"console": "console",
}

// TestRolesFromOwnPackages: `make generate` writes each provider's role
// from the markers of the packages of its components and of no other: each
// path it names lies in the package tree of one of the provider's
// components, and each component has a path in its tree.
func TestRolesFromOwnPackages(t *testing.T) {
	g := NewWithT(t)
	makefile, err := os.ReadFile("../../Makefile")
	g.Expect(err).NotTo(HaveOccurred())
	paths := map[string][]string{} // label → package directories
	for _, m := range generateLine.FindAllStringSubmatch(string(makefile), -1) {
		if m[1] != "metalshift-"+m[3]+"-manager" {
			continue // not a provider's (the operator's)
		}
		for _, p := range strings.Split(m[2], ";") {
			paths[m[3]] = append(paths[m[3]], strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/..."))
		}
	}
	for _, p := range All() {
		if p.Type == clusterctlv1.CoreProviderType {
			g.Expect(paths).NotTo(HaveKey(p.Label()), "the core's role is upstream's")
			continue
		}
		if p.Unprivileged {
			// No role, and no marker asks for one.
			g.Expect(paths).NotTo(HaveKey(p.Label()), "%s is unprivileged", p.Label())
			for _, c := range p.Components {
				g.Expect(rbacMarkers(t, componentPackages[c])).To(BeEmpty(), "component %s of unprivileged %s", c, p.Label())
			}
			continue
		}
		g.Expect(paths).To(HaveKey(p.Label()), "make generate writes config/rbac/%s", p.Label())
		var trees []string
		for _, c := range p.Components {
			tree, ok := componentPackages[c]
			g.Expect(ok).To(BeTrue(), "componentPackages names the package of component %s", c)
			trees = append(trees, tree)
			g.Expect(paths[p.Label()]).To(ContainElement(Or(Equal(tree), HavePrefix(tree+"/"))), "%s: component %s (%s) has no path", p.Label(), c, tree)
		}
		for _, path := range paths[p.Label()] {
			g.Expect(slices.ContainsFunc(trees, func(tree string) bool { return path == tree || strings.HasPrefix(path, tree+"/") })).
				To(BeTrue(), "%s: %s is no package of its components (%v)", p.Label(), path, trees)
		}
	}
	var names []string
	for _, c := range manager.Components() {
		names = append(names, c.Name)
	}
	g.Expect(names).To(ContainElements(slices.Collect(maps.Keys(componentPackages))))
}

// rbacMarkers are the kubebuilder RBAC markers in the Go files of a
// package tree (the repository's directory dir).
func rbacMarkers(t *testing.T, dir string) []string {
	t.Helper()
	var markers []string
	err := filepath.WalkDir(filepath.Join("../..", dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "+kubebuilder:rbac") {
				markers = append(markers, path+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return markers
}

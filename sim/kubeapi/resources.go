package kubeapi

import (
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resource is one served group/version/resource.
type resource struct {
	gvr        schema.GroupVersionResource
	kind       string
	listKind   string
	singular   string
	shortNames []string
	namespaced bool
	// status and approval tell which subresources it has.
	status, approval bool
	// keepStatusOnCreate: a create may set the status (Nodes, Pods);
	// otherwise a resource with a status subresource starts without one.
	keepStatusOnCreate bool
	// typed: the scheme knows the kind, so protobuf bodies and strategic
	// merge patches can be decoded.
	typed bool
	// crd names the CustomResourceDefinition that serves it.
	crd string
}

func (r *resource) gvk() schema.GroupVersionKind { return r.gvr.GroupVersion().WithKind(r.kind) }

// builtins are the built-in resources served.
var builtins = []resource{
	{gvr: core("namespaces"), kind: "Namespace", shortNames: []string{"ns"}, status: true},
	{gvr: core("nodes"), kind: "Node", shortNames: []string{"no"}, status: true, keepStatusOnCreate: true},
	{gvr: core("secrets"), kind: "Secret", namespaced: true},
	{gvr: core("configmaps"), kind: "ConfigMap", shortNames: []string{"cm"}, namespaced: true},
	{gvr: core("serviceaccounts"), kind: "ServiceAccount", shortNames: []string{"sa"}, namespaced: true},
	{gvr: core("services"), kind: "Service", shortNames: []string{"svc"}, namespaced: true, status: true},
	{gvr: core("pods"), kind: "Pod", shortNames: []string{"po"}, namespaced: true, status: true, keepStatusOnCreate: true},
	{gvr: core("events"), kind: "Event", shortNames: []string{"ev"}, namespaced: true},
	{gvr: gvr("coordination.k8s.io", "v1", "leases"), kind: "Lease", namespaced: true},
	{gvr: gvr("certificates.k8s.io", "v1", "certificatesigningrequests"), kind: "CertificateSigningRequest", shortNames: []string{"csr"},
		status: true, approval: true},
	{gvr: gvr("rbac.authorization.k8s.io", "v1", "clusterroles"), kind: "ClusterRole"},
	{gvr: gvr("rbac.authorization.k8s.io", "v1", "clusterrolebindings"), kind: "ClusterRoleBinding"},
	{gvr: gvr("rbac.authorization.k8s.io", "v1", "roles"), kind: "Role", namespaced: true},
	{gvr: gvr("rbac.authorization.k8s.io", "v1", "rolebindings"), kind: "RoleBinding", namespaced: true},
	{gvr: gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions"), kind: "CustomResourceDefinition", shortNames: []string{"crd", "crds"},
		status: true},
}

func core(res string) schema.GroupVersionResource { return gvr("", "v1", res) }

func gvr(g, v, r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
}

var (
	namespacesGR = core("namespaces").GroupResource()
	secretsGR    = core("secrets").GroupResource()
	csrsGR       = gvr("certificates.k8s.io", "v1", "certificatesigningrequests").GroupResource()
	crdsGR       = gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions").GroupResource()
)

// registry holds the served resources; the server's lock guards it.
type registry struct {
	byGVR map[schema.GroupVersionResource]*resource
}

func newRegistry(scheme *runtime.Scheme) *registry {
	g := &registry{byGVR: map[schema.GroupVersionResource]*resource{}}
	for i := range builtins {
		r := builtins[i]
		r.listKind = r.kind + "List"
		r.singular = strings.ToLower(r.kind)
		r.typed = scheme.Recognizes(r.gvk())
		g.byGVR[r.gvr] = &r
	}
	return g
}

// lookup returns the resource served at gvr, or nil.
func (g *registry) lookup(gvr schema.GroupVersionResource) *resource { return g.byGVR[gvr] }

// versions returns the resources of group/version, or nil when it is not served.
func (g *registry) versions(gv schema.GroupVersion) []*resource {
	var out []*resource
	for k, r := range g.byGVR {
		if k.GroupVersion() == gv {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvr.Resource < out[j].gvr.Resource })
	return out
}

// addCRD serves the versions of crd, replacing what an older copy served.
func (g *registry) addCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	g.removeCRD(crd.Name)
	names := crd.Spec.Names
	listKind := names.ListKind
	if listKind == "" {
		listKind = names.Kind + "List"
	}
	singular := names.Singular
	if singular == "" {
		singular = strings.ToLower(names.Kind)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		r := &resource{
			gvr: gvr(crd.Spec.Group, v.Name, names.Plural), kind: names.Kind, listKind: listKind, singular: singular,
			shortNames: names.ShortNames, namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped, crd: crd.Name,
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			r.status = true
		}
		g.byGVR[r.gvr] = r
	}
}

// removeCRD stops serving what the CRD named name served.
func (g *registry) removeCRD(name string) {
	for k, r := range g.byGVR {
		if r.crd == name {
			delete(g.byGVR, k)
		}
	}
}

// resourceList is the discovery document of group/version.
func (g *registry) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	rs := g.versions(gv)
	if len(rs) == 0 {
		return nil
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	verbs := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.gvr.Resource, SingularName: r.singular, Namespaced: r.namespaced, Kind: r.kind, Verbs: verbs, ShortNames: r.shortNames,
		})
		for _, sub := range []struct {
			name string
			on   bool
		}{{"status", r.status}, {"approval", r.approval}} {
			if sub.on {
				list.APIResources = append(list.APIResources, metav1.APIResource{
					Name: r.gvr.Resource + "/" + sub.name, Namespaced: r.namespaced, Kind: r.kind, Verbs: metav1.Verbs{"get", "patch", "update"},
				})
			}
		}
	}
	return list
}

// groups is the /apis discovery document: every group but the core one,
// each version once, the preferred one first (v1 before v1beta1 ...).
func (g *registry) groups() *metav1.APIGroupList {
	byGroup := map[string]map[string]bool{}
	for k := range g.byGVR {
		if k.Group == "" {
			continue
		}
		if byGroup[k.Group] == nil {
			byGroup[k.Group] = map[string]bool{}
		}
		byGroup[k.Group][k.Version] = true
	}
	names := make([]string, 0, len(byGroup))
	for n := range byGroup {
		names = append(names, n)
	}
	sort.Strings(names)
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, n := range names {
		list.Groups = append(list.Groups, *apiGroup(n, byGroup[n]))
	}
	return list
}

// group is the /apis/<group> discovery document, or nil.
func (g *registry) group(name string) *metav1.APIGroup {
	for _, grp := range g.groups().Groups {
		if grp.Name == name {
			grp.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			return &grp
		}
	}
	return nil
}

func apiGroup(name string, versions map[string]bool) *metav1.APIGroup {
	vs := make([]string, 0, len(versions))
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return versionLess(vs[j], vs[i]) })
	grp := &metav1.APIGroup{Name: name}
	for _, v := range vs {
		grp.Versions = append(grp.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
	}
	grp.PreferredVersion = grp.Versions[0]
	return grp
}

// versionLess orders Kubernetes versions: v1alpha1 < v1beta1 < v1 < v2.
func versionLess(a, b string) bool {
	rank := func(v string) (major int, stage int, minor int) {
		stage = 2
		if _, err := fmt.Sscanf(v, "v%d", &major); err != nil {
			return 0, -1, 0
		}
		rest := strings.TrimLeft(strings.TrimPrefix(v, "v"), "0123456789")
		switch {
		case strings.HasPrefix(rest, "alpha"):
			stage = 0
			_, _ = fmt.Sscanf(rest, "alpha%d", &minor)
		case strings.HasPrefix(rest, "beta"):
			stage = 1
			_, _ = fmt.Sscanf(rest, "beta%d", &minor)
		}
		return major, stage, minor
	}
	am, as, an := rank(a)
	bm, bs, bn := rank(b)
	if as != bs && (as == 2 || bs == 2) {
		return as < bs
	}
	if am != bm {
		return am < bm
	}
	if as != bs {
		return as < bs
	}
	return an < bn
}

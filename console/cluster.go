package console

import (
	"context"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
)

// The two paths a cluster page shows.
const (
	pathAgent      = "agent"
	pathClusterAPI = "cluster-api"
)

// clusterPage serves the page of one cluster.
func (s *Server) clusterPage(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("path")
	if path != pathAgent && path != pathClusterAPI {
		http.NotFound(w, r)
		return
	}
	ss := s.sessions.get(r)
	if ss == nil {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "page.html", pageData{Page: "cluster", User: ss.user, CSRF: ss.csrf,
		Path: path, Namespace: r.PathValue("namespace"), Name: r.PathValue("name")})
}

// handleClusterWatch relays what a cluster page shows: for the agent
// path the install, its ClusterDeployment, its Agents and their Events;
// for Cluster API the Cluster, its Machines and their Events.
func (s *Server) handleClusterWatch(w http.ResponseWriter, r *http.Request, ss *session) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var kinds []kind
	switch r.PathValue("path") {
	case pathAgent:
		cd, err := s.clusterDeploymentOf(r.Context(), ss, ns, name)
		if err != nil {
			status, msg := apiStatus(err)
			writeJSONError(w, status, msg)
			return
		}
		kinds = agentClusterKinds(name, cd)
	case pathClusterAPI:
		kinds = capiClusterKinds(name)
	default:
		writeJSONError(w, http.StatusNotFound, "No such page.")
		return
	}
	s.serveWatch(w, r, ss, kinds, ns)
}

// clusterDeploymentOf is the name of the ClusterDeployment of the agent
// cluster name, read as the user: the one its AgentClusterInstall refers
// to, else name itself (a ClusterDeployment no install refers to, or an
// install the user may not read, whose watch then says so).
func (s *Server) clusterDeploymentOf(ctx context.Context, ss *session, ns, name string) (string, error) {
	aci := &hiveextv1.AgentClusterInstall{}
	err := ss.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, aci)
	switch {
	case err == nil:
		return aci.Spec.ClusterDeploymentRef.Name, nil
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return name, nil
	}
	s.endIfUnauthorized(ss, err)
	return "", err
}

// named keeps the object called name.
func named(name string) func(client.Object) bool {
	return func(o client.Object) bool { return o.GetName() == name }
}

// involving keeps the Events about one of kinds named name, or about any
// object of anyOf (the page keeps those of its own objects: an Agent or
// a Machine joins a cluster after its Events began).
func involving(named map[string]string, anyOf ...string) func(client.Object) bool {
	return func(o client.Object) bool {
		e, ok := o.(*corev1.Event)
		if !ok {
			return false
		}
		ref := e.InvolvedObject
		if n, ok := named[ref.Kind]; ok && n == ref.Name {
			return true
		}
		for _, k := range anyOf {
			if ref.Kind == k {
				return true
			}
		}
		return false
	}
}

func eventKind(keep func(client.Object) bool) kind {
	return kind{name: "Event", plural: "Events", newList: func() client.ObjectList { return &corev1.EventList{} }, keep: keep}
}

func agentClusterKinds(aci, cd string) []kind {
	return []kind{
		{name: "AgentClusterInstall", plural: "AgentClusterInstalls", newList: func() client.ObjectList { return &hiveextv1.AgentClusterInstallList{} }, keep: named(aci)},
		{name: "ClusterDeployment", plural: "ClusterDeployments", newList: func() client.ObjectList { return &hivev1.ClusterDeploymentList{} }, keep: named(cd),
			// Shown even when an install refers to it: it is the page's cluster.
			row: func(o client.Object) (Row, bool) {
				r, _ := cdRow(o.(*hivev1.ClusterDeployment))
				return r, true
			}},
		{name: "Agent", plural: "Agents", newList: func() client.ObjectList { return &agentinstallv1.AgentList{} }, keep: func(o client.Object) bool {
			ref := o.(*agentinstallv1.Agent).Spec.ClusterDeploymentName
			return ref != nil && ref.Name == cd
		}},
		eventKind(involving(map[string]string{"AgentClusterInstall": aci, "ClusterDeployment": cd}, "Agent")),
	}
}

func capiClusterKinds(name string) []kind {
	return []kind{
		{name: "Cluster", plural: "Clusters", newList: func() client.ObjectList { return &clusterv1.ClusterList{} }, keep: named(name),
			row: func(o client.Object) (Row, bool) { return clusterPageRow(o.(*clusterv1.Cluster)), true }},
		{name: "Machine", plural: "Machines", newList: func() client.ObjectList { return &clusterv1.MachineList{} }, keep: func(o client.Object) bool {
			return o.(*clusterv1.Machine).Spec.ClusterName == name
		}},
		eventKind(involving(map[string]string{"Cluster": name}, "Machine")),
	}
}

// handleKubeconfig sends an agent cluster's admin kubeconfig, read from
// the Secret <ClusterDeployment>-admin-kubeconfig as the user: the API
// server's RBAC decides who may have it.
func (s *Server) handleKubeconfig(w http.ResponseWriter, r *http.Request, ss *session) {
	ns := r.PathValue("namespace")
	cd, err := s.clusterDeploymentOf(r.Context(), ss, ns, r.PathValue("name"))
	if err != nil {
		status, msg := apiStatus(err)
		writeJSONError(w, status, msg)
		return
	}
	secret := &corev1.Secret{}
	if err := ss.client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: cd + "-admin-kubeconfig"}, secret); err != nil {
		s.endIfUnauthorized(ss, err)
		status, msg := apiStatus(err)
		if status == http.StatusForbidden {
			msg = "You may not read the kubeconfig: " + msg
		}
		writeJSONError(w, status, msg)
		return
	}
	data, ok := secret.Data["kubeconfig"]
	if !ok {
		writeJSONError(w, http.StatusNotFound, "The Secret "+secret.Name+" has no key kubeconfig.")
		return
	}
	s.log.Info("Sent a kubeconfig", "user", ss.user, "secret", client.ObjectKeyFromObject(secret).String())
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Disposition", `attachment; filename="`+strings.ReplaceAll(cd, `"`, "")+`-kubeconfig"`)
	_, _ = w.Write(data)
}

package server

import (
	"context"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// +kubebuilder:rbac:groups="",resources=events,verbs=list;create;patch

// EventsURL is the signed URL of the events of an install (filters
// "cluster_id", <AgentClusterInstall UID>), of an InfraEnv and its hosts
// ("infra_env_id", <UID>) or of one host ("infra_env_id", <UID>,
// "host_id", <Agent name>). It does not expire.
func (s *Server) EventsURL(filters ...string) string {
	return s.opts.BaseURL + assistedapi.EventsPath + "?" + assistedapi.EventsQuery(s.opts.Key, filters...)
}

// subject is who an event is about, in the REST API's terms.
type subject struct{ cluster, infraEnv, host string }

// events serves the Kubernetes Events of the objects an events URL names,
// oldest first, in upstream's shape. The API server keeps Events for an
// hour by default (kube-apiserver --event-ttl), so older ones are gone.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := assistedapi.VerifyEventsQuery(s.opts.Key, q); err != nil {
		apiError(w, http.StatusUnauthorized, "invalid or missing api_key")
		return
	}
	ctx := r.Context()
	ns, about, err := s.eventSubjects(ctx, q.Get("cluster_id"), q.Get("infra_env_id"), q.Get("host_id"))
	if err != nil {
		if apierrors.IsNotFound(err) {
			apiError(w, http.StatusNotFound, err.Error())
		} else {
			apiError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	l := &corev1.EventList{}
	if err := s.opts.APIReader.List(ctx, l, client.InNamespace(ns)); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := []assistedapi.Event{}
	for _, e := range l.Items {
		sub, ok := about[e.InvolvedObject.UID]
		if !ok {
			continue
		}
		sev := assistedapi.SeverityInfo
		if e.Type == corev1.EventTypeWarning {
			sev = assistedapi.SeverityWarning
		}
		out = append(out, assistedapi.Event{ClusterID: sub.cluster, InfraEnvID: sub.infraEnv, HostID: sub.host,
			EventTime: eventTime(&e).UTC().Format(time.RFC3339), Name: e.Reason, Message: e.Message, Severity: sev, Category: "user"})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].EventTime < out[j].EventTime })
	writeJSON(w, http.StatusOK, out)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// eventSubjects returns the namespace and the UIDs of the objects whose
// events an events URL shows: an install's AgentClusterInstall,
// ClusterDeployment and Agents; an InfraEnv and its Agents; one Agent.
func (s *Server) eventSubjects(ctx context.Context, clusterID, infraEnvID, hostID string) (string, map[types.UID]subject, error) {
	about := map[types.UID]subject{}
	agents := &agentinstallv1.AgentList{}
	if clusterID != "" {
		aci, err := s.clusterByID(ctx, clusterID)
		if err != nil {
			return "", nil, err
		}
		about[aci.UID] = subject{cluster: clusterID}
		cd := &hivev1.ClusterDeployment{}
		key := types.NamespacedName{Namespace: aci.Namespace, Name: aci.Spec.ClusterDeploymentRef.Name}
		if err := s.opts.Client.Get(ctx, key, cd); err == nil {
			about[cd.UID] = subject{cluster: clusterID}
		} else if !apierrors.IsNotFound(err) {
			return "", nil, err
		}
		if err := s.opts.Client.List(ctx, agents, client.MatchingFields{record.ClusterDeploymentIndex: key.String()}); err != nil {
			return "", nil, err
		}
		for _, a := range agents.Items {
			about[a.UID] = subject{cluster: clusterID, host: a.Name}
		}
		return aci.Namespace, about, nil
	}
	ie, err := s.infraEnvByID(ctx, infraEnvID)
	if err != nil {
		return "", nil, err
	}
	if hostID != "" {
		a := &agentinstallv1.Agent{}
		if err := s.opts.Client.Get(ctx, types.NamespacedName{Namespace: ie.Namespace, Name: hostID}, a); err != nil {
			return "", nil, err
		}
		about[a.UID] = subject{infraEnv: infraEnvID, host: hostID}
		return ie.Namespace, about, nil
	}
	about[ie.UID] = subject{infraEnv: infraEnvID}
	if err := s.opts.Client.List(ctx, agents, client.InNamespace(ie.Namespace),
		client.MatchingLabels{agentinstallv1.InfraEnvNameLabel: ie.Name}); err != nil {
		return "", nil, err
	}
	for _, a := range agents.Items {
		about[a.UID] = subject{infraEnv: infraEnvID, host: a.Name}
	}
	return ie.Namespace, about, nil
}

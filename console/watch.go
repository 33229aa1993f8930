package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// kind is one kind a page follows.
type kind struct {
	// name is the Kind, plural is how messages name it.
	name, plural string
	newList      func() client.ObjectList
	// keep, when set, tells which objects of the kind the page shows.
	keep func(client.Object) bool
	// row, when set, is the row of an object on the page (rowOf otherwise).
	row func(client.Object) (Row, bool)
}

// rowOf is the row of o on k's page; ok is false for an object the page
// does not show.
func (k kind) rowOf(o client.Object) (Row, bool) {
	if k.keep != nil && !k.keep(o) {
		r, _ := rowOf(o)
		return r, false
	}
	if k.row != nil {
		return k.row(o)
	}
	return rowOf(o)
}

// pages are the kinds each page follows.
var pages = map[string][]kind{
	"fleet": {
		{name: "Cluster", plural: "Clusters", newList: func() client.ObjectList { return &clusterv1.ClusterList{} }},
		{name: "AgentClusterInstall", plural: "AgentClusterInstalls", newList: func() client.ObjectList { return &hiveextv1.AgentClusterInstallList{} }},
		{name: "ClusterDeployment", plural: "ClusterDeployments", newList: func() client.ObjectList { return &hivev1.ClusterDeploymentList{} }},
	},
	"hosts": {
		{name: "Agent", plural: "Agents", newList: func() client.ObjectList { return &agentinstallv1.AgentList{} }},
		{name: "BareMetalHost", plural: "BareMetalHosts", newList: func() client.ObjectList { return &metal3v1.BareMetalHostList{} }},
	},
	"infraenvs": {
		{name: "InfraEnv", plural: "InfraEnvs", newList: func() client.ObjectList { return &agentinstallv1.InfraEnvList{} }},
		{name: "Agent", plural: "Agents", newList: func() client.ObjectList { return &agentinstallv1.AgentList{} }},
		{name: "NMStateConfig", plural: "NMStateConfigs", newList: func() client.ObjectList { return &agentinstallv1.NMStateConfigList{} }},
	},
}

// rowOf is the row of o; ok is false for an object its page does not show.
func rowOf(o client.Object) (Row, bool) {
	switch o := o.(type) {
	case *clusterv1.Cluster:
		return clusterRow(o), true
	case *hiveextv1.AgentClusterInstall:
		return aciRow(o), true
	case *hivev1.ClusterDeployment:
		return cdRow(o)
	case *agentinstallv1.Agent:
		return agentRow(o), true
	case *metal3v1.BareMetalHost:
		return hostRow(o), true
	case *clusterv1.Machine:
		return machineRow(o), true
	case *corev1.Event:
		return eventRow(o), true
	case *agentinstallv1.InfraEnv:
		return infraEnvRow(o), true
	case *agentinstallv1.NMStateConfig:
		return nmStateRow(o), true
	}
	return Row{}, false
}

// event is one Server-Sent Event: its type and JSON data.
type event struct {
	name string
	data any
}

// Data of the events. reset replaces a kind's rows; upsert and remove
// change one; denied tells that the user may not read a kind;
// unauthorized (no data) that the API server no longer accepts the
// user's token, whose session has ended.
type (
	resetData struct {
		Kind string `json:"kind"`
		Rows []Row  `json:"rows"`
	}
	deniedData struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	removeData struct {
		Key string `json:"key"`
	}
)

// heartbeat is how often an idle stream sends a comment, which keeps
// proxies from closing it and ends it soon after the browser left.
const heartbeat = 25 * time.Second

// serveWatch relays the watches of a page's kinds in namespace (all when
// empty), made as the session's user, to the browser as Server-Sent
// Events. A stream the API server ends is listed and watched again; on
// any other error the stream ends and the browser's EventSource, which
// reconnects, starts over.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, ss *session, kinds []kind, namespace string) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan event)
	for _, k := range kinds {
		go func() {
			err := relay(ctx, ss.client, k, namespace, events)
			if apierrors.IsUnauthorized(err) {
				s.endIfUnauthorized(ss, err)
				select {
				case events <- event{"unauthorized", struct{}{}}:
				case <-ctx.Done():
				}
			}
			if err != nil && ctx.Err() == nil {
				s.log.V(1).Info("Watch relay ended", "user", ss.user, "kind", k.name, "error", err.Error())
				cancel()
			}
		}()
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	_ = rc.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-tick.C:
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		case ev := <-events:
			err = writeEvent(w, ev)
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

func writeEvent(w http.ResponseWriter, ev event) error {
	data, err := json.Marshal(ev.data)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data)
	return err
}

// relay lists kind k and follows it until ctx ends, sending events. A
// kind the user may not read is one denied event, then nothing.
func relay(ctx context.Context, c client.WithWatch, k kind, namespace string, events chan<- event) error {
	send := func(name string, data any) bool {
		select {
		case events <- event{name, data}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		list := k.newList()
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return denyOr(err, k, "list", namespace, send)
		}
		if !send("reset", resetData{Kind: k.name, Rows: rows(k, list)}) {
			return nil
		}
		w, err := c.Watch(ctx, k.newList(), client.InNamespace(namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true}})
		if err != nil {
			return denyOr(err, k, "watch", namespace, send)
		}
		if err := follow(k, w, send); err != nil {
			return err
		}
	}
	return nil
}

// follow sends the rows of w's events until w ends (nil: list again) or
// fails.
func follow(k kind, w watch.Interface, send func(string, any) bool) error {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
				return nil // too old: list again
			}
			return apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			continue
		}
		o, ok := ev.Object.(client.Object)
		if !ok {
			continue
		}
		row, shown := k.rowOf(o)
		var sent bool
		switch {
		case ev.Type == watch.Deleted || !shown:
			sent = send("remove", removeData{Key: row.Key})
		default:
			sent = send("upsert", row)
		}
		if !sent {
			return nil
		}
	}
	return nil
}

// denyOr turns a refusal of the API server into a denied event; other
// errors are returned.
func denyOr(err error, k kind, verb, namespace string, send func(string, any) bool) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	where := "in all namespaces: choose a namespace you may read"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	send("denied", deniedData{Kind: k.name, Message: fmt.Sprintf("You may not %s %s %s.", verb, k.plural, where)})
	return nil
}

func rows(k kind, list client.ObjectList) []Row {
	var out []Row
	_ = meta.EachListItem(list, func(o kruntime.Object) error { // typed lists: never fails
		if co, ok := o.(client.Object); ok {
			if r, shown := k.rowOf(co); shown {
				out = append(out, r)
			}
		}
		return nil
	})
	if out == nil {
		out = []Row{}
	}
	return out
}

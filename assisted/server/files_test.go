package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/server"
)

// TestFiles: a host's Ignition goes to that host's credential, for its
// own file names, while it runs its install step up to its download; the
// bootstrap Ignition to the bootstrap host only. A forged credential gets
// 401 before anything is looked up.
func TestFiles(t *testing.T) {
	g := NewWithT(t)
	in := newInstall(t, g)
	credA, credB := newHost(g, in.ie, hostA), newHost(g, in.ie, hostB)
	for id, bootstrap := range map[string]bool{hostA: true, hostB: false} {
		setStatus(g, in.ns, id, func(a *agentinstallv1.Agent) {
			a.Status.Role, a.Status.Bootstrap = agentinstallv1.HostRoleMaster, bootstrap
			a.Status.DebugInfo.State = hoststate.StatusKnown
		})
	}
	file := func(cluster, name string, headers ...string) answer {
		return call(g, http.MethodGet, assistedapi.Path(assistedapi.FilesPath, cluster)+"?"+url.Values{"file_name": {name}}.Encode(), nil, headers...)
	}
	cluster := string(in.aci.UID)
	masterA, bootstrapA := assistedapi.IgnitionFileName("master", hostA), assistedapi.IgnitionFileName("bootstrap", hostA)
	masterB, bootstrapB := assistedapi.IgnitionFileName("master", hostB), assistedapi.IgnitionFileName("bootstrap", hostB)

	// Before the install: nothing, even to the host.
	a := file(cluster, masterA, assistedapi.HostKeyHeader, credA)
	g.Expect(a.code).To(Equal(http.StatusConflict), a.body)
	g.Expect(a.body).To(ContainSubstring(`host ` + hostA + ` is not downloading its installation files (state \"known\", stage \"\")`))

	// A host running an install step the hub has no record of (a hub
	// restored from a backup taken while the install was prepared): not
	// yet, to be asked again, not a refusal that fails the install.
	setState(g, in.ns, hostA, hoststate.StatusPreparingSuccessful, assistedapi.StageInstalling)
	a = file(cluster, masterA, assistedapi.HostKeyHeader, credA)
	g.Expect(a.code).To(Equal(http.StatusServiceUnavailable), a.body)
	g.Expect(a.header.Get("Retry-After")).To(Equal("5"))
	g.Expect(a.body).To(ContainSubstring(`its install has not started on the hub yet (state \"preparing-successful\")`))
	g.Expect(a.body).NotTo(ContainSubstring("ignition"))
	a = file(cluster, masterA, assistedapi.HostKeyHeader, credB)
	g.Expect(a.code).To(Equal(http.StatusUnauthorized), "another host's credential is refused first: %s", a.body)

	setState(g, in.ns, hostA, hoststate.StatusInstalling, "")
	setState(g, in.ns, hostB, hoststate.StatusInstallingInProgress, assistedapi.StageInstalling)
	for name, tc := range map[string]struct {
		cluster, file string
		headers       []string
		code          int
	}{
		"no credential":                {cluster, masterA, nil, http.StatusUnauthorized},
		"InfraEnv key only":            {cluster, masterA, []string{assistedapi.AuthHeader, infraEnvKey(in.ie)}, http.StatusUnauthorized},
		"forged":                       {cluster, masterA, []string{assistedapi.HostKeyHeader, forged(g, in.ie, hostA)}, http.StatusUnauthorized},
		"forged, no such cluster":      {"9d1c3b2a-1111-4222-8333-444455556666", masterA, []string{assistedapi.HostKeyHeader, forged(g, in.ie, hostA)}, http.StatusUnauthorized},
		"another host's file":          {cluster, masterA, []string{assistedapi.HostKeyHeader, credB}, http.StatusUnauthorized},
		"the bootstrap's, by a master": {cluster, bootstrapA, []string{assistedapi.HostKeyHeader, credB}, http.StatusUnauthorized},
		"bootstrap, not the bootstrap": {cluster, bootstrapB, []string{assistedapi.HostKeyHeader, credB}, http.StatusConflict},
		"another cluster's path":       {"9d1c3b2a-1111-4222-8333-444455556666", masterA, []string{assistedapi.HostKeyHeader, credA}, http.StatusNotFound},
		"a bad file name":              {cluster, "master-x.ign", []string{assistedapi.HostKeyHeader, credA}, http.StatusBadRequest},
	} {
		r := file(tc.cluster, tc.file, tc.headers...)
		g.Expect(r.code).To(Equal(tc.code), "%s: %s", name, r.body)
		g.Expect(r.header.Get("Content-Type")).NotTo(Equal("application/vnd.coreos.ignition+json"), name)
	}
	for name, tc := range map[string]struct{ file, cred string }{
		"the bootstrap's own":       {bootstrapA, credA},
		"the bootstrap's master":    {masterA, credA},
		"a master's, installing":    {masterB, credB},
		"a master's, at Installing": {masterB, credB},
	} {
		r := file(cluster, tc.file, assistedapi.HostKeyHeader, tc.cred)
		g.Expect(r.code).To(Equal(http.StatusOK), "%s: %s", name, r.body)
		g.Expect(r.header.Get("Content-Type")).To(Equal("application/vnd.coreos.ignition+json"))
		g.Expect(json.Valid([]byte(r.body))).To(BeTrue())
	}

	// Once the host wrote its disk, or once it is done: nothing.
	setState(g, in.ns, hostB, hoststate.StatusInstallingInProgress, assistedapi.StageWritingImageToDisk)
	r := file(cluster, masterB, assistedapi.HostKeyHeader, credB)
	g.Expect(r.code).To(Equal(http.StatusConflict), r.body)
	setState(g, in.ns, hostB, hoststate.StatusInstalled, assistedapi.StageDone)
	r = file(cluster, masterB, assistedapi.HostKeyHeader, credB)
	g.Expect(r.code).To(Equal(http.StatusUnauthorized), r.body)
	g.Expect(r.body).To(ContainSubstring("finished its installation"))
}

// TestFilesFromACacheBehind: a host handed its install step downloads its
// Ignition even when the server's cache has not seen the write that
// started its install yet (a loaded hub's watch lags): the API's copy
// decides a refusal. Found at 300 installs whose agents polled every
// minute, where one host's download was refused and its install failed.
func TestFilesFromACacheBehind(t *testing.T) {
	g := NewWithT(t)
	in := newInstall(t, g)
	cred := newHost(g, in.ie, hostA)
	setStatus(g, in.ns, hostA, func(a *agentinstallv1.Agent) {
		a.Status.Role, a.Status.Bootstrap = agentinstallv1.HostRoleMaster, true
		a.Status.DebugInfo.State = hoststate.StatusPreparingSuccessful
	})
	lagging := &laggingCache{Client: cached, held: agent(g, in.ns, hostA)}
	setState(g, in.ns, hostA, hoststate.StatusInstalling, "")
	srv, err := server.New(server.Options{Client: lagging, APIReader: env.Client, Key: key, BaseURL: base, PollInterval: 1})
	g.Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	get := func(name string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, ts.URL+assistedapi.Path(assistedapi.FilesPath, string(in.aci.UID))+"?"+url.Values{"file_name": {name}}.Encode(), nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set(assistedapi.HostKeyHeader, cred)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
	code, body := get(assistedapi.IgnitionFileName("master", hostA))
	g.Expect(code).To(Equal(http.StatusOK), "the cache says preparing-successful, the API installing: %s", body)
	g.Expect(json.Valid([]byte(body))).To(BeTrue())

	// A refusal stands when the API says so too.
	setState(g, in.ns, hostA, hoststate.StatusInstallingInProgress, assistedapi.StageWritingImageToDisk)
	code, body = get(assistedapi.IgnitionFileName("master", hostA))
	g.Expect(code).To(Equal(http.StatusConflict), body)
	g.Expect(body).To(ContainSubstring(`stage \"Writing image to disk\"`))
}

// laggingCache is the server's cache as a loaded hub's can be: it answers
// a Get of the held Agent with the held copy, whatever the API has since.
type laggingCache struct {
	client.Client
	held *agentinstallv1.Agent
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if a, ok := obj.(*agentinstallv1.Agent); ok && key == client.ObjectKeyFromObject(c.held) {
		c.held.DeepCopyInto(a)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

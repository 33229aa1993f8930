package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
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

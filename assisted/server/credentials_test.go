package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	"github.com/metalshift/metalshift/assisted/pkg/conditions"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

const (
	hostA = "0c6b3e9a-2f4d-4b8e-9a1c-7d5e6f708192"
	hostB = "1d7c4f0b-3a5e-4c9f-8b2d-8e6f7a819203"
	hostC = "2e8d5a1c-4b6f-4d0a-9c3e-9f7a8b92a314"
)

// forged is a credential in the right shape for host id of ie, signed
// with another key.
func forged(g Gomega, ie *agentinstallv1.InfraEnv, id string) string {
	cred, err := assistedapi.NewHostKey([]byte("not-the-hub-signing-key-at-all!!"), string(ie.UID), id)
	g.Expect(err).NotTo(HaveOccurred())
	return cred
}

// TestRegister: the InfraEnv's key registers a new host, whose answer
// carries its credential (recorded hashed on its Agent); registering an
// existing host again takes that host's credential — without it the
// registration is refused, recorded as an Event, and changes nothing.
func TestRegister(t *testing.T) {
	g := NewWithT(t)
	in := newInstall(t, g)
	path := assistedapi.Path(assistedapi.RegisterPath, in.ie.UID)
	params := jsonBody(g, assistedapi.HostCreateParams{HostID: hostA})

	other := newInfraEnv(g, in.ns, "other", nil)
	for name, headers := range map[string][]string{
		"no key":                {},
		"forged key":            {assistedapi.AuthHeader, "Zm9yZ2Vk"},
		"another InfraEnv's":    {assistedapi.AuthHeader, infraEnvKey(other)},
		"a host credential":     {assistedapi.HostKeyHeader, forged(g, in.ie, hostA)},
		"the key of a host key": {assistedapi.AuthHeader, assistedapi.HostKeyHash(infraEnvKey(in.ie))},
	} {
		a := call(g, http.MethodPost, path, params, headers...)
		g.Expect(a.code).To(Equal(http.StatusUnauthorized), name)
		g.Expect(a.header.Get(assistedapi.HostKeyHeader)).To(BeEmpty(), name)
	}

	cred := newHost(g, in.ie, hostA)
	a := agent(g, in.ns, hostA)
	g.Expect(a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentHostCredentialAnnotation, assistedapi.HostKeyHash(cred)))
	g.Expect(record.State(a)).To(Equal(hoststate.StatusDiscovering), "the state the Agent reconciler makes of the registration")
	ieID, hostID, err := assistedapi.ParseHostKey(key, cred)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{ieID, hostID}).To(Equal([]string{string(in.ie.UID), hostA}))
	credB := newHost(g, in.ie, hostB)

	// A machine with the image and the host's ID, but not its credential.
	setState(g, in.ns, hostA, hoststate.StatusKnown, "")
	before := agent(g, in.ns, hostA)
	for name, tc := range map[string]struct {
		headers []string
		code    int
	}{
		"InfraEnv key only":        {nil, http.StatusConflict},
		"forged credential":        {[]string{assistedapi.HostKeyHeader, forged(g, in.ie, hostA)}, http.StatusUnauthorized},
		"another host's":           {[]string{assistedapi.HostKeyHeader, credB}, http.StatusUnauthorized},
		"garbage":                  {[]string{assistedapi.HostKeyHeader, strings.Repeat("x", 300)}, http.StatusUnauthorized},
		"own credential, mangled":  {[]string{assistedapi.HostKeyHeader, cred[:len(cred)-2] + "AA"}, http.StatusUnauthorized},
		"InfraEnv key as host key": {[]string{assistedapi.HostKeyHeader, infraEnvKey(in.ie)}, http.StatusUnauthorized},
	} {
		r := register(g, in.ie, hostA, tc.headers...)
		g.Expect(r.code).To(Equal(tc.code), "%s: %s", name, r.body)
		g.Expect(r.header.Get(assistedapi.HostKeyHeader)).To(BeEmpty(), name)
	}
	refused := register(g, in.ie, hostA)
	g.Expect(refused.body).To(ContainSubstring("Host " + hostA + " is registered already: registering it again needs its credential (X-Metalshift-Host-Key)"))
	g.Expect(refused.body).To(ContainSubstring("delete Agent " + in.ns + "/" + hostA + " to let it register anew"))
	g.Expect(agent(g, in.ns, hostA).ResourceVersion).To(Equal(before.ResourceVersion), "nothing changed")
	g.Eventually(func() []string { return events(g, before) }).Should(ContainElement(HavePrefix("Warning RegistrationRefused: Host " + hostA + " is registered already")))

	// The host itself registers again (bound: it was told to): no new
	// credential, the one it has stays.
	again := register(g, in.ie, hostA, assistedapi.HostKeyHeader, cred)
	g.Expect(again.code).To(Equal(http.StatusCreated), again.body)
	g.Expect(again.header.Get(assistedapi.HostKeyHeader)).To(BeEmpty())
	g.Expect(again.body).NotTo(ContainSubstring(cred))
	g.Expect(agent(g, in.ns, hostA).Annotations).To(HaveKeyWithValue(agentinstallv1.AgentHostCredentialAnnotation, assistedapi.HostKeyHash(cred)))

	// Bodies: capped, and a host ID must be a UUID.
	big := call(g, http.MethodPost, path, []byte(`{"host_id":"`+hostC+`","discovery_agent_version":"`+strings.Repeat("v", 20<<10)+`"}`),
		assistedapi.AuthHeader, infraEnvKey(in.ie))
	g.Expect(big.code).To(Equal(http.StatusRequestEntityTooLarge), big.body)
	bad := call(g, http.MethodPost, path, []byte(`{"host_id":"../../x"}`), assistedapi.AuthHeader, infraEnvKey(in.ie))
	g.Expect(bad.code).To(Equal(http.StatusBadRequest))
	g.Expect(bad.body).To(ContainSubstring("host_id must be a UUID"))
}

// TestAgentCap: an InfraEnv registers at most the cap's number of Agents;
// the next new host is refused with a message that says what to do,
// while hosts already registered register again.
func TestAgentCap(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	ie := newInfraEnv(g, ns, "capped", nil)
	var first string
	for i := range maxAgents {
		cred := newHost(g, ie, fmt.Sprintf("3f9e6b2d-5c70-4e1b-8d4f-%012d", i))
		if i == 0 {
			first = cred
		}
	}
	l := &agentinstallv1.AgentList{}
	g.Eventually(func() int {
		g.Expect(cached.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
		return len(l.Items)
	}).Should(Equal(maxAgents))
	over := register(g, ie, hostC)
	g.Expect(over.code).To(Equal(http.StatusForbidden), over.body)
	g.Expect(over.body).To(ContainSubstring(fmt.Sprintf("infra env %s/capped has %d Agents, the most the agent service registers for one InfraEnv", ns, maxAgents)))
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	g.Expect(l.Items).To(HaveLen(maxAgents))
	again := register(g, ie, fmt.Sprintf("3f9e6b2d-5c70-4e1b-8d4f-%012d", 0), assistedapi.HostKeyHeader, first)
	g.Expect(again.code).To(Equal(http.StatusCreated), again.body)
}

// hostCall is one of the per-host endpoints, with a body it accepts.
type hostCall struct {
	name, method, path string
	body               []byte
	ok                 int
}

func hostCalls(g Gomega, in *install, host string) []hostCall {
	ie := string(in.ie.UID)
	return []hostCall{
		{"instructions", http.MethodGet, assistedapi.Path(assistedapi.InstructionsPath, ie, host), nil, http.StatusOK},
		{"step reply", http.MethodPost, assistedapi.Path(assistedapi.InstructionsPath, ie, host),
			jsonBody(g, assistedapi.StepReply{StepType: assistedapi.StepNTPSynchronizer, StepID: "ntp-1", Output: `{"ntp_sources":[]}`}), http.StatusNoContent},
		{"progress", http.MethodPut, assistedapi.Path(assistedapi.ProgressPath, ie, host),
			jsonBody(g, assistedapi.HostProgress{CurrentStage: assistedapi.StageStartingInstallation}), http.StatusOK},
		{"logs progress", http.MethodPut, assistedapi.Path(assistedapi.LogsProgressPath, ie, host), []byte(`{"logs_state":"completed"}`), http.StatusNoContent},
		{"logs", http.MethodPost, assistedapi.Path(assistedapi.LogsPath, in.aci.UID) + "?" +
			url.Values{"logs_type": {"host"}, "infra_env_id": {ie}, "host_id": {host}}.Encode(), []byte("a log tarball"), http.StatusNoContent},
	}
}

// TestHostCalls: every per-host endpoint takes the host's credential
// only: not the InfraEnv's key, a forged credential or another host's;
// nor the host's own once its install is done (its install step
// succeeded, or its Agent says installed) or once its Agent is gone.
func TestHostCalls(t *testing.T) {
	g := NewWithT(t)
	in := newInstall(t, g)
	cred, credB := newHost(g, in.ie, hostA), newHost(g, in.ie, hostB)
	for _, id := range []string{hostA, hostB} {
		setStatus(g, in.ns, id, func(a *agentinstallv1.Agent) {
			a.Status.Role, a.Status.DebugInfo.State = agentinstallv1.HostRoleMaster, hoststate.StatusInstallingInProgress
		})
	}

	refused := map[string][]string{
		"no credential":         nil,
		"InfraEnv key only":     {assistedapi.AuthHeader, infraEnvKey(in.ie)},
		"InfraEnv key as host":  {assistedapi.HostKeyHeader, infraEnvKey(in.ie)},
		"forged":                {assistedapi.HostKeyHeader, forged(g, in.ie, hostA)},
		"another host's":        {assistedapi.HostKeyHeader, credB},
		"truncated":             {assistedapi.HostKeyHeader, cred[:40]},
		"another InfraEnv's ID": {assistedapi.HostKeyHeader, strings.Replace(cred, string(in.ie.UID), "5e8a4d5c-7b1e-4c1e-9f7a-3c1d2e3f4a5b", 1)},
	}
	for _, c := range hostCalls(g, in, hostA) {
		for name, headers := range refused {
			a := call(g, c.method, c.path, c.body, headers...)
			g.Expect(a.code).To(Equal(http.StatusUnauthorized), "%s, %s: %s", c.name, name, a.body)
		}
		a := call(g, c.method, c.path, c.body, assistedapi.AuthHeader, infraEnvKey(in.ie))
		g.Expect(a.body).To(ContainSubstring("this call needs the host's credential (X-Metalshift-Host-Key), which the host's registration answered; "+
			"the InfraEnv's X-Secret-Key only registers hosts"), c.name)
		a = call(g, c.method, c.path, c.body, assistedapi.HostKeyHeader, cred)
		g.Expect(a.code).To(Equal(c.ok), "%s: %s", c.name, a.body)
	}
	// Logs of a cluster the host is not bound to.
	logs := call(g, http.MethodPost, assistedapi.Path(assistedapi.LogsPath, "9d1c3b2a-1111-4222-8333-444455556666"), []byte("x"),
		assistedapi.HostKeyHeader, cred)
	g.Expect(logs.code).To(Equal(http.StatusNotFound), logs.body)

	// The install step succeeded: the credential has ended, for every call.
	reply := call(g, http.MethodPost, assistedapi.Path(assistedapi.InstructionsPath, in.ie.UID, hostA),
		jsonBody(g, assistedapi.StepReply{StepType: assistedapi.StepInstall, StepID: "install-1"}), assistedapi.HostKeyHeader, cred)
	g.Expect(reply.code).To(Equal(http.StatusNoContent), reply.body)
	g.Expect(agent(g, in.ns, hostA).Annotations).To(HaveKeyWithValue(agentinstallv1.AgentHostCredentialAnnotation, agentinstallv1.AgentHostCredentialEnded))
	seen(g, agent(g, in.ns, hostA))
	for _, c := range hostCalls(g, in, hostA) {
		a := call(g, c.method, c.path, c.body, assistedapi.HostKeyHeader, cred)
		g.Expect(a.code).To(Equal(http.StatusUnauthorized), "%s after the install: %s", c.name, a.body)
		g.Expect(a.body).To(ContainSubstring("host " + hostA + " finished its installation: its credential has ended"))
	}
	r := register(g, in.ie, hostA, assistedapi.HostKeyHeader, cred)
	g.Expect(r.code).To(Equal(http.StatusUnauthorized), "a replayed credential does not register either")

	// Installed (as the controllers say): ended too, whatever the annotation.
	setState(g, in.ns, hostB, hoststate.StatusInstalled, assistedapi.StageDone)
	for _, c := range hostCalls(g, in, hostB) {
		a := call(g, c.method, c.path, c.body, assistedapi.HostKeyHeader, credB)
		g.Expect(a.code).To(Equal(http.StatusUnauthorized), "%s once installed: %s", c.name, a.body)
	}

	// The Agent deleted: its credential opens nothing, and the host
	// registers as a new one.
	credC := newHost(g, in.ie, hostC)
	g.Expect(env.Client.Delete(context.Background(), agent(g, in.ns, hostC))).To(Succeed())
	g.Eventually(func() int {
		return call(g, http.MethodGet, assistedapi.Path(assistedapi.InstructionsPath, in.ie.UID, hostC), nil, assistedapi.HostKeyHeader, credC).code
	}).Should(Equal(http.StatusNotFound))
	renewed := register(g, in.ie, hostC, assistedapi.HostKeyHeader, credC)
	g.Expect(renewed.code).To(Equal(http.StatusCreated))
	g.Expect(renewed.header.Get(assistedapi.HostKeyHeader)).NotTo(BeEmpty())
	g.Expect(renewed.header.Get(assistedapi.HostKeyHeader)).NotTo(Equal(credC))
	seen(g, agent(g, in.ns, hostC))
	old := call(g, http.MethodGet, assistedapi.Path(assistedapi.InstructionsPath, in.ie.UID, hostC), nil, assistedapi.HostKeyHeader, credC)
	g.Expect(old.code).To(Equal(http.StatusUnauthorized), "the deleted Agent's credential is not the new one's")
}

// TestBodies: every body is capped (413); an inventory too large or
// malformed is refused with 400 naming the problem, and one sent after
// discovery changes nothing.
func TestBodies(t *testing.T) {
	g := NewWithT(t)
	in := newInstall(t, g)
	cred := newHost(g, in.ie, hostA)
	ie := string(in.ie.UID)
	instr := assistedapi.Path(assistedapi.InstructionsPath, ie, hostA)
	host := []string{assistedapi.HostKeyHeader, cred}
	infraEnvAuth := []string{assistedapi.AuthHeader, infraEnvKey(in.ie)}
	for name, c := range map[string]struct {
		method, path string
		// prefix starts a body the endpoint reads on (a JSON value left
		// open), cap is the endpoint's.
		prefix  string
		cap     int
		headers []string
	}{
		"registration": {http.MethodPost, assistedapi.Path(assistedapi.RegisterPath, ie), `{"host_id":"`, 16 << 10, infraEnvAuth},
		"step reply":   {http.MethodPost, instr, `{"step_type":"inventory","output":"`, 256 << 10, host},
		"progress": {http.MethodPut, assistedapi.Path(assistedapi.ProgressPath, ie, hostA),
			`{"current_stage":"Installing","progress_info":"`, 16 << 10, host},
		"logs progress": {http.MethodPut, assistedapi.Path(assistedapi.LogsProgressPath, ie, hostA), "", 16 << 10, host},
		"logs":          {http.MethodPost, assistedapi.Path(assistedapi.LogsPath, in.aci.UID), "", 8 << 20, host},
		"manual boot":   {http.MethodPost, assistedapi.Path(assistedapi.ManualBootPath, ie), `{"mac_addresses":["`, 16 << 10, infraEnvAuth},
	} {
		// A length over the cap is refused before the body is read: the
		// request sends none.
		code := declaredLength(g, c.method, c.path, c.cap+1, c.headers...)
		g.Expect(code).To(Equal(http.StatusRequestEntityTooLarge), "%s, declared", name)
		// Without a length (chunked), reading stops at the cap.
		body := c.prefix + strings.Repeat("x", c.cap+1<<10-len(c.prefix))
		req, err := http.NewRequest(c.method, base+c.path, io.MultiReader(strings.NewReader(body)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(req.ContentLength).To(BeZero(), "sent chunked")
		for i := 0; i+1 < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred(), name)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge), "%s, chunked: %s", name, data)
		// Refused, a request's body is not read at all.
		g.Expect(declaredLength(g, c.method, c.path, 100)).To(Equal(http.StatusUnauthorized), "%s, unauthenticated", name)
	}

	inventory := func(inv string) answer {
		return call(g, http.MethodPost, instr, jsonBody(g, assistedapi.StepReply{StepType: assistedapi.StepInventory, StepID: "inv", Output: inv}), host...)
	}
	disks := make([]assistedapi.Disk, assistedapi.MaxInventoryDisks+1)
	for name, tc := range map[string]struct{ inv, want string }{
		"too large":   {`{"hostname":"` + strings.Repeat("h", 70<<10) + `"}`, "inventory: 71695 bytes, at most 65536"},
		"not JSON":    {`{"hostname":`, "inventory: not an inventory: unexpected EOF"},
		"wrong types": {`{"cpu":{"count":"eight"}}`, "inventory: not an inventory: json: cannot unmarshal string into Go struct field CPU.cpu.count of type int64"},
		"two objects": {`{}{}`, "inventory: not an inventory: data after the JSON object"},
		"disks":       {string(jsonBody(g, assistedapi.Inventory{Disks: disks})), "inventory: 257 disks, at most 256"},
		"hostname":    {`{"hostname":"` + strings.Repeat("h", 254) + `"}`, "inventory: 254 hostname characters, at most 253"},
	} {
		a := inventory(tc.inv)
		g.Expect(a.code).To(Equal(http.StatusBadRequest), name)
		var e assistedapi.Error
		g.Expect(json.Unmarshal([]byte(a.body), &e)).To(Succeed())
		g.Expect(e.Reason).To(Equal(tc.want), name)
	}
	g.Expect(agent(g, in.ns, hostA).Status.Inventory.ReportTime).To(BeNil(), "no inventory taken")

	good := inventory(`{"hostname":"master-0","cpu":{"count":8,"architecture":"x86_64"}}`)
	g.Expect(good.code).To(Equal(http.StatusNoContent), good.body)
	g.Expect(agent(g, in.ns, hostA).Status.Inventory.Hostname).To(Equal("master-0"))
	setState(g, in.ns, hostA, hoststate.StatusInstalling, "")
	late := inventory(`{"hostname":"master-1","cpu":{"count":8,"architecture":"x86_64"}}`)
	g.Expect(late.code).To(Equal(http.StatusNoContent), late.body)
	g.Expect(agent(g, in.ns, hostA).Status.Inventory.Hostname).To(Equal("master-0"), "the install's inventory stays")
}

// TestReclaim: a host unbound after its install boots the discovery image
// again and registers with the InfraEnv's key alone: it gets a new
// credential, the old one ends, and the Agent must be approved again.
func TestReclaim(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	ie := newInfraEnv(g, ns, "reclaim", nil)
	cred := newHost(g, ie, hostA)
	a := agent(g, ns, hostA)
	a.Spec.Approved = true
	g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
	setState(g, ns, hostA, hoststate.StatusUnbindingPendingUserAction, assistedapi.StageDone)

	r := register(g, ie, hostA)
	g.Expect(r.code).To(Equal(http.StatusCreated), r.body)
	renewed := r.header.Get(assistedapi.HostKeyHeader)
	g.Expect(renewed).NotTo(BeEmpty())
	a = agent(g, ns, hostA)
	g.Expect(a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentHostCredentialAnnotation, assistedapi.HostKeyHash(renewed)))
	g.Expect(a.Spec.Approved).To(BeFalse())
	g.Expect(record.State(a)).To(Equal(hoststate.StatusDiscoveringUnbound), "the state the Agent reconciler makes of the registration")
	g.Eventually(func() []string { return events(g, a) }).Should(ContainElement(
		"Normal ReclaimRegistered: Host " + hostA + ", unbound after its installation, registered again from its InfraEnv's discovery image: " +
			"it has a new credential and must be approved again (x1)"))
	seen(g, a)
	instr := assistedapi.Path(assistedapi.InstructionsPath, ie.UID, hostA)
	g.Expect(call(g, http.MethodGet, instr, nil, assistedapi.HostKeyHeader, cred).code).To(Equal(http.StatusUnauthorized))
	g.Expect(call(g, http.MethodGet, instr, nil, assistedapi.HostKeyHeader, renewed).code).To(Equal(http.StatusOK))
	// Discovering again, the host is no longer reclaimable without it.
	g.Expect(register(g, ie, hostA).code).To(Equal(http.StatusConflict))
}

// TestManualBoot: the InfraEnv's key reports a converged-flow image booted
// by hand; a report is idempotent per MAC: the same machine again writes
// nothing and records no Event, a new machine is added.
func TestManualBoot(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	ie := newInfraEnv(g, ns, "converged", nil)
	path := assistedapi.Path(assistedapi.ManualBootPath, ie.UID)
	post := func(macs ...string) answer {
		return call(g, http.MethodPost, path, jsonBody(g, assistedapi.ManualBoot{MACAddresses: macs}), assistedapi.AuthHeader, infraEnvKey(ie))
	}
	g.Expect(call(g, http.MethodPost, path, jsonBody(g, assistedapi.ManualBoot{MACAddresses: []string{"52:54:00:00:00:01"}})).code).
		To(Equal(http.StatusUnauthorized))
	bad := post("52:54:00:00:00:01", "not-a-mac")
	g.Expect(bad.code).To(Equal(http.StatusBadRequest))
	g.Expect(bad.body).To(ContainSubstring(`mac_addresses: \"not-a-mac\" is not a MAC address`))
	g.Expect(post().code).To(Equal(http.StatusBadRequest))

	g.Expect(post("52:54:00:00:00:01", "52:54:00:00:00:02").code).To(Equal(http.StatusNoContent))
	cur := &agentinstallv1.InfraEnv{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ie), cur)).To(Succeed())
	seen(g, cur)
	rv := cur.ResourceVersion
	g.Expect(post("52:54:00:00:00:02", "52:54:00:00:00:01").code).To(Equal(http.StatusNoContent))
	g.Expect(post("52:54:00:00:00:01").code).To(Equal(http.StatusNoContent))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ie), cur)).To(Succeed())
	g.Expect(cur.ResourceVersion).To(Equal(rv), "the same machine again writes nothing")

	g.Expect(post("52:54:00:00:00:0A").code).To(Equal(http.StatusNoContent))
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ie), cur)).To(Succeed())
	var msg string
	for _, c := range cur.Status.Conditions {
		if string(c.Type) == conditions.ManualBootCondition {
			msg = c.Message
		}
	}
	g.Expect(msg).To(HavePrefix("Machines with MAC 52:54:00:00:00:01, 52:54:00:00:00:02, 52:54:00:00:00:0a booted this InfraEnv's discovery image by hand."))
	// Events are written in order: once the new machine's is there, a
	// repeated report's would be too.
	g.Eventually(func() []string { return events(g, ie) }).Should(ContainElement(ContainSubstring("MAC 52:54:00:00:00:0a booted")))
	g.Expect(events(g, ie)).To(ConsistOf(
		HavePrefix("Warning NeedsHostEngine: Machines with MAC 52:54:00:00:00:01, 52:54:00:00:00:02 booted"),
		HavePrefix("Warning NeedsHostEngine: Machines with MAC 52:54:00:00:00:0a booted")))
	for _, e := range events(g, ie) {
		g.Expect(e).To(HaveSuffix("(x1)"))
	}
}

// TestHostProof: a registration with the host engine's proof for a
// BareMetalHost of the InfraEnv's namespace records that host on the
// Agent (BMAC approves, in the converged flow, only such Agents); a
// forged or expired proof, or one of another namespace's host, is refused
// and nothing is registered.
func TestHostProof(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	ie := newInfraEnv(g, ns, "converged", nil)
	proof := func(key []byte, ns string, expires time.Time) string {
		return assistedapi.SignHostProof(key, assistedapi.HostProof{Namespace: ns, Name: "host-0", UID: "6f1c2b3a-uid", Expires: expires})
	}
	later := time.Now().Add(time.Hour)
	for name, p := range map[string]string{
		"forged":               proof([]byte("not-the-hub-signing-key-at-all!!"), ns, later),
		"expired":              proof(key, ns, time.Now().Add(-time.Minute)),
		"another namespace's":  proof(key, "elsewhere", later),
		"not a proof":          "mhp1.e30.AAAA",
		"a host credential":    forged(g, ie, hostA),
		"the InfraEnv's key":   infraEnvKey(ie),
		"a proof, then a dot.": proof(key, ns, later) + ".",
	} {
		r := register(g, ie, hostA, assistedapi.HostProofHeader, p)
		g.Expect(r.code).To(Equal(http.StatusUnauthorized), "%s: %s", name, r.body)
	}
	l := &agentinstallv1.AgentList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	g.Expect(l.Items).To(BeEmpty())

	r := register(g, ie, hostA, assistedapi.HostProofHeader, proof(key, ns, later))
	g.Expect(r.code).To(Equal(http.StatusCreated), r.body)
	g.Expect(agent(g, ns, hostA).Annotations).To(HaveKeyWithValue(agentinstallv1.AgentRegisteredForHostAnnotation, "host-0/6f1c2b3a-uid"))
	seen(g, agent(g, ns, hostA))
	// Without its credential, a proof does not register the host again.
	g.Expect(register(g, ie, hostA, assistedapi.HostProofHeader, proof(key, ns, later)).code).To(Equal(http.StatusConflict))
}

// declaredLength sends a request whose headers announce a body of length
// bytes, and no body, and returns the answer's status: the server must
// answer without waiting for the body.
func declaredLength(g Gomega, method, path string, length int, headers ...string) int {
	u, err := url.Parse(base)
	g.Expect(err).NotTo(HaveOccurred())
	conn, err := net.Dial("tcp", u.Host)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	// A server waiting for the body fails the test instead of hanging it.
	g.Expect(conn.SetDeadline(time.Now().Add(20 * time.Second))).To(Succeed())
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, u.Host, length)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n")
	_, err = conn.Write([]byte(b.String()))
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	return resp.StatusCode
}

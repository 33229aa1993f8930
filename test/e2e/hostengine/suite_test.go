package hostengine

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/config"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/hostenginetest"
	"github.com/metalshift/metalshift/internal/serving"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
)

// The suite's envtest hub, and short names for hostenginetest's helpers
// bound to it.

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

const canary = hostenginetest.Canary

type engine = hostenginetest.Engine

func startEngine(t *testing.T, addr string, key []byte, logs *hostenginetest.LogBuffer, edits ...func(*hostengine.Options)) *engine {
	t.Helper()
	return hostenginetest.StartEngine(t, env, addr, key, logs, edits...)
}

func startLab(t *testing.T, e *engine, n int) *sim.Lab {
	t.Helper()
	return hostenginetest.StartLab(t, e, n)
}

func newImageServer(t testing.TB, size int, gated bool) *hostenginetest.ImageServer {
	t.Helper()
	return hostenginetest.NewImageServer(t, size, gated)
}

func createHost(t *testing.T, lab *sim.Lab, i int, ns string, virtualMedia bool, mutate func(*metal3v1.BareMetalHost)) *metal3v1.BareMetalHost {
	t.Helper()
	return hostenginetest.CreateHost(t, env, lab, i, ns, virtualMedia, mutate)
}

func get(g Gomega, host *metal3v1.BareMetalHost) *metal3v1.BareMetalHost {
	return hostenginetest.Get(g, env, host)
}

func waitState(t *testing.T, host *metal3v1.BareMetalHost, state metal3v1.ProvisioningState) {
	t.Helper()
	hostenginetest.WaitState(t, env, host, state)
}

func update(t *testing.T, host *metal3v1.BareMetalHost, mutate func(*metal3v1.BareMetalHost)) {
	t.Helper()
	hostenginetest.Update(t, env, host, mutate)
}

func userDataSecret(t *testing.T, ns, name, data string) *corev1.SecretReference {
	t.Helper()
	return hostenginetest.UserDataSecret(t, env, ns, name, data)
}

func expectNoCanary(t *testing.T, e *engine, ns string, hosts ...*metal3v1.BareMetalHost) {
	t.Helper()
	hostenginetest.ExpectNoCanary(t, env, e, ns, hosts...)
}

func issueTLS(t *testing.T, more ...string) (serving.TLSFiles, []byte) {
	t.Helper()
	return hostenginetest.IssueTLS(t, more...)
}

func ctrlConfigSkipNameValidation() config.Controller { return hostenginetest.ControllerConfig() }

// Package testenv runs reconciler tests against a real kube-apiserver and
// etcd (envtest, with the binaries `make tools` builds into bin/), with every
// CRD of package config (metalshift's and Cluster API's), and the admission
// and conversion webhooks served in-process, exactly as on the embedded hub.
//
// # The reconciler-test pattern
//
// Each reconciler package has a suite_test.go whose TestMain starts one
// environment for the package, with the reconcilers under test (and, when
// the test needs them, the Cluster API core controllers) registered in a
// real manager (component.NewManager, as the hub builds its own), with
// the hub's shared services (component.Hub):
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.Run(m, &env, testenv.Options{
//			Components: []component.Component{{Name: "metalcluster", Setup: func(ctx context.Context, hub *component.Hub) error {
//				mgr := hub.Manager
//				return (&metalcluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{})
//			}}},
//		}))
//	}
//
// Tests then create objects in a namespace of their own (env.Namespace(t)),
// and assert on observable state with gomega's Eventually, reading through
// env.Client, which bypasses caches:
//
//	g.Eventually(func(g Gomega) {
//		g.Expect(env.Client.Get(ctx, key, obj)).To(Succeed())
//		g.Expect(obj.Status.Initialization.Provisioned).To(HaveValue(BeTrue()))
//	}).Should(Succeed())
//
// Tests never sleep to wait, never use a fake client, and never talk to
// anything but loopback. Pure logic is tested with table tests instead.
//
// # Ports
//
// A server a test starts in-process takes a listener the test already
// holds (Listen, and the components' Listener options), never a port seen
// free and released: until the server binds it, anything on the machine
// may take it. A server that must be told a port (another process, or one
// that comes back on the same port after a restart) gets a reserved one
// (ReservedAddr, package internal/ports), as do the environment's etcd,
// kube-apiserver and webhook and metrics servers.
//
// The package must only be imported from tests.
package testenv

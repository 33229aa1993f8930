package baremetalhost_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
)

// TestLoopbackBMCRefused: on a hub that does not allow loopback (the
// production default), a host whose BMC address is on loopback, by
// address or by a name that resolves there, over Redfish or IPMI, gets a
// registration error naming spec.bmc.address and the policy, and the BMC
// gets nothing: not a request, not a datagram, so not the credentials.
func TestLoopbackBMCRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil, func(o *hostengine.Options) { o.BMCEgress = egress.Policy{} })

	var requests atomic.Int32
	redfishBMC := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	t.Cleanup(redfishBMC.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(redfishBMC.URL, "http://"))
	ipmiBMC, err := net.ListenPacket("udp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ipmiBMC.Close()

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bmc", Namespace: ns},
		StringData: map[string]string{"username": "admin", "password": canary}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	var hosts []*metal3v1.BareMetalHost
	for i, address := range []string{
		"redfish-virtualmedia+http://127.0.0.1:" + port + "/redfish/v1/Systems/1",
		"redfish+http://localhost:" + port + "/redfish/v1/Systems/1",
		"ipmi://" + ipmiBMC.LocalAddr().String(),
	} {
		h := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: []string{"by-address", "by-name", "ipmi"}[i], Namespace: ns},
			Spec: metal3v1.BareMetalHostSpec{BMC: metal3v1.BMCDetails{Address: address, CredentialsName: secret.Name}}}
		g.Expect(env.Client.Create(ctx, h)).To(Succeed())
		hosts = append(hosts, h)
	}
	for _, h := range hosts {
		g.Eventually(func(g Gomega) {
			get(g, h)
			g.Expect(h.Status.ErrorType).To(Equal(metal3v1.RegistrationError))
			g.Expect(h.Status.ErrorMessage).To(And(
				HavePrefix("spec.bmc.address "+h.Spec.BMC.Address+" is refused, nothing was sent to it: "),
				ContainSubstring("is a loopback address, to which the hub's BMC egress policy allows no BMC connections"),
				ContainSubstring("--bmc-allow-loopback")))
			g.Expect(h.Status.Provisioning.State).To(Equal(metal3v1.StateRegistering))
		}).Should(Succeed(), h.Name)
	}
	g.Expect(requests.Load()).To(BeZero(), "the Redfish BMC got no request")
	// The first datagram the IPMI BMC reads is one sent now.
	probe, err := net.Dial("udp", ipmiBMC.LocalAddr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer probe.Close()
	_, err = probe.Write([]byte("probe"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ipmiBMC.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	_, from, err := ipmiBMC.ReadFrom(make([]byte, 512))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(from.String()).To(Equal(probe.LocalAddr().String()), "the IPMI BMC got no datagram before the probe")

	evs := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", "RegistrationError"), HaveField("Note", ContainSubstring("BMC egress policy")))))
	expectNoCanary(t, e, ns, hosts...)
}

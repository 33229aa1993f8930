package equinix_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/infrastructure/equinix/metalclient"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
)

// driven counts, per API host, the requests made by the clients the
// provider's driver made (the suite's reconcilers run with driver).
var driven = &requestCount{byHost: map[string]int{}}

type requestCount struct {
	mu     sync.Mutex
	byHost map[string]int
}

func (c *requestCount) get(host string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byHost[host]
}

func (c *requestCount) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.byHost[req.URL.Host]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// driver is the Equinix Metal driver with its requests counted: a
// second metal cloud's driver plugs in where it does.
func driver(o metalclient.Options) (metalclient.API, error) {
	hc := http.Client{Transport: driven}
	if o.HTTPClient != nil {
		hc.Timeout = o.HTTPClient.Timeout
	}
	o.HTTPClient = &hc
	return metalclient.New(o)
}

// TestProviderCallsOnlyThroughItsDriver: every request the cloud served
// for a cluster's whole life (its addresses, a machine's device, their
// deletion) came from a client the provider's driver made: the
// reconcilers reach the cloud through metalclient.API alone, so another
// metal cloud is another driver.
func TestProviderCallsOnlyThroughItsDriver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCloud(t, simequinix.Options{})
	cluster, emc := newCluster(t, g, ns, c)
	m, emm := newMachine(t, g, ns, "driven", infrav1.EquinixMetalMachineSpec{})
	g.Eventually(func(g Gomega) {
		get(g, emm)
		g.Expect(emm.Status.DeviceID).NotTo(BeEmpty())
		get(g, emc)
		g.Expect(emc.Status.APIIP).NotTo(BeNil())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, m)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		gone(g, emm)
		gone(g, emc)
		g.Expect(c.s.Ledger().Empty()).To(BeTrue())
	}).WithTimeout(time.Minute).Should(Succeed())

	u, err := url.Parse(c.url)
	g.Expect(err).NotTo(HaveOccurred())
	served := 0
	for _, n := range c.s.Requests() {
		served += n
	}
	g.Expect(served).To(BeNumerically(">", 5))
	g.Expect(driven.get(u.Host)).To(Equal(served), "requests through the driver, requests the cloud served")
}

package deployserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/internal/shard"
	"github.com/metalshift/metalshift/internal/testenv"
)

// TestShards: the deploy servers of managers with watch-filter values a
// and b serve the same signed URLs and MACs, each only for the hosts of
// its shard: another shard's host, and an unlabelled one, are unknown to
// it (404), to its signed image URLs, its network boot and its token
// exchange alike.
func TestShards(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	bases := map[string]string{}
	var signer *deployserver.Server
	for _, v := range []string{"a", "b"} {
		s, err := deployserver.New(deployserver.Options{Client: env.Client, Key: key, BaseURL: "http://deploy.example:6180", WatchFilterValue: v})
		g.Expect(err).NotTo(HaveOccurred())
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		bases[v], signer = ts.URL, s
	}
	for i, v := range []string{"", "a", "b"} {
		mac := fmt.Sprintf("52:54:00:ee:00:%02x", i)
		host := newHost(t, ns, fmt.Sprintf("host-%d", i), mac, "00000000000000e1")
		if v != "" {
			before := host.DeepCopy()
			host.Labels = map[string]string{shard.Label: v}
			g.Expect(env.Client.Patch(context.Background(), host, client.MergeFrom(before))).To(Succeed())
		}
		ipxe := signer.DeployImage(get(g, host)).IPXEURL
		for server, base := range bases {
			want := http.StatusNotFound
			if server == v {
				want = http.StatusOK
			}
			code, body := testenv.Call(t, http.MethodGet, strings.Replace(ipxe, "http://deploy.example:6180", base, 1), "", nil)
			g.Expect(code).To(Equal(want), "server %s, image of a host of shard %q: %s", server, v, body)
			code, body = testenv.Call(t, http.MethodGet, base+deployserver.PXEPath+mac, "", nil)
			g.Expect(code).To(Equal(want), "server %s, network boot of a host of shard %q: %s", server, v, body)
		}
	}
}

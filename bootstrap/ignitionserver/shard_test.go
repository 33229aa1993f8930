package ignitionserver

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/internal/shard"
)

// TestShard: the ignition server of a manager with watch-filter value a
// serves a config whose Secret is labelled a only; with another shard's
// label or none, a valid token is refused as for a config it does not
// serve.
func TestShard(t *testing.T) {
	g := NewWithT(t)
	ts := newTestServer(t, time.Hour)
	ts.shard = "a"
	token := ts.token()
	for _, c := range []struct {
		label string
		want  int
	}{{"", http.StatusForbidden}, {"b", http.StatusForbidden}, {"a", http.StatusOK}} {
		sec := ts.served.DeepCopy()
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(sec), sec)).To(Succeed())
		before := sec.DeepCopy()
		if c.label == "" {
			delete(sec.Labels, shard.Label)
		} else {
			sec.Labels[shard.Label] = c.label
		}
		g.Expect(env.Client.Patch(context.Background(), sec, client.MergeFrom(before))).To(Succeed())
		g.Expect(ts.get(t, token)).To(Equal(c.want), "a Secret of shard %q", c.label)
	}
}

package bootstrap_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/bootstrap"
	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

// TestIgnitionServerOnListener: given a listener, the ignition server
// serves on it, with no listen address of its own.
func TestIgnitionServerOnListener(t *testing.T) {
	g := NewWithT(t)
	ln := testenv.Listen(t)
	env, err := testenv.Start(testenv.Options{Components: []component.Component{{Name: "bootstrap",
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return bootstrap.Setup(ctx, hub.Manager, bootstrap.Options{
				IgnitionServer:   ignitionserver.Config{SigningKey: []byte("0123456789abcdef0123456789abcdef")},
				IgnitionListener: ln,
			})
		}}}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	// The manager has started: the server serves on ln (a connection waits
	// in ln's backlog until it does; without a server it times out).
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + ln.Addr().String() + "/ignition/v1/x/y") //nolint:noctx // a test's loopback URL
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "no token")
}

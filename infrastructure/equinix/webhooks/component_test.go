package webhooks_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/infrastructure/equinix"
)

// TestComponentServesWebhooks: the infrastructure-equinix component serves
// every webhook config/webhook declares for its kinds when the manager
// serves webhooks, and none when it does not.
func TestComponentServesWebhooks(t *testing.T) {
	g := NewWithT(t)
	var paths []string
	mutating, validating, err := config.OwnWebhooks()
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range mutating {
		for _, w := range c.Webhooks {
			paths = append(paths, *w.ClientConfig.Service.Path)
		}
	}
	for _, c := range validating {
		for _, w := range c.Webhooks {
			paths = append(paths, *w.ClientConfig.Service.Path)
		}
	}
	var ours []string
	for _, p := range paths {
		if strings.HasSuffix(p, "-equinixmetalcluster") || strings.HasSuffix(p, "-equinixmetalmachine") || strings.HasSuffix(p, "-equinixmetalmachinetemplate") {
			ours = append(ours, p)
		}
	}
	g.Expect(ours).To(HaveLen(3))

	for _, serve := range []bool{true, false} {
		// Two managers in one process register the component's
		// controllers twice: their names are checked once per process.
		controllers := component.ControllerConfig()
		controllers.SkipNameValidation = ptr.To(true)
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
			Controller: controllers, WebhookServer: webhook.NewServer(webhook.Options{})})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(equinix.Component().Setup(context.Background(), &component.Hub{Manager: mgr, Webhooks: serve})).To(Succeed())
		mux := mgr.GetWebhookServer().WebhookMux()
		if !serve {
			g.Expect(mux).To(BeNil(), "nothing registered")
			continue
		}
		for _, p := range ours {
			_, pattern := mux.Handler(&http.Request{URL: &url.URL{Path: p}})
			g.Expect(pattern).To(Equal(p))
		}
	}
}

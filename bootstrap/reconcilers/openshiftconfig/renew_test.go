package openshiftconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	ignitionapi "github.com/metalshift/metalshift/api/ignition/v1"
	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/internal/ignition"
)

// TestServedTokenIsRenewed: while its Machine waits for infrastructure, a
// served config's token is renewed in the data Secret once half its
// lifetime is gone; after the infrastructure is provisioned it is left to
// expire, and the server then refuses it.
func TestServedTokenIsRenewed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	srv, err := ignitionserver.New(ignitionserver.Options{Client: env.Client, Key: []byte("0123456789abcdef0123456789abcdef"),
		BaseURL: "http://192.0.2.1:6181", TokenTTL: time.Hour, Clock: clk})
	g.Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	r := &Reconciler{Client: env.Client, APIReader: env.Client, IgnitionServer: srv}

	// A config with no owner Machine: the suite's reconciler leaves it alone.
	cfg := &bootstrapv1.OpenShiftConfig{ObjectMeta: metav1.ObjectMeta{Name: "waits", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "ocp", Namespace: ns}}
	served, err := r.writeOwnedSecret(ctx, cfg, cluster, cfg.Name+servedSuffix, corev1.SecretTypeOpaque,
		map[string][]byte{"value": []byte(`{"ignition":{"version":"3.4.0"}}`)}, ignitionserver.ServedLabel)
	g.Expect(err).NotTo(HaveOccurred())
	pointer, expiry, err := r.remote(cfg, served)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expiry).To(Equal(clk.Now().Add(time.Hour)))
	data, err := r.writeOwnedSecret(ctx, cfg, cluster, cfg.Name, clusterv1.ClusterSecretType,
		map[string][]byte{"value": pointer, "format": []byte("ignition")})
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Status.DataSecretName = ptr.To(data.Name)
	cfg.Status.Initialization.DataSecretCreated = ptr.To(true)

	token := func() string {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(data), s)).To(Succeed())
		tok, ok := ignition.RemoteToken(s.Data["value"])
		g.Expect(ok).To(BeTrue())
		return tok
	}
	status := func(tok string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+ignitionserver.PathPrefix+ns+"/"+served.Name, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}
	// The Machine waits for a host: nothing fetches the config yet (a
	// fetch would start its fetch window).
	first := token()

	waiting := &clusterv1.Machine{}
	res, err := r.renewServedToken(ctx, cfg, waiting, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(30*time.Minute), "looks again when half the lifetime is gone")
	g.Expect(token()).To(Equal(first))

	clk.SetTime(clk.Now().Add(31 * time.Minute))
	res, err = r.renewServedToken(ctx, cfg, waiting, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(30 * time.Minute))
	second := token()
	g.Expect(second).NotTo(Equal(first))
	exp, ok := ignitionapi.TokenExpiry(second)
	g.Expect(ok).To(BeTrue())
	g.Expect(exp).To(BeTemporally("==", clk.Now().Add(time.Hour)))

	clk.SetTime(clk.Now().Add(30 * time.Minute)) // past the first token's expiry
	g.Expect(status(first)).To(Equal(http.StatusForbidden))
	g.Expect(status(second)).To(Equal(http.StatusOK), "the host boots with the renewed token")

	provisioned := &clusterv1.Machine{Status: clusterv1.MachineStatus{Initialization: clusterv1.MachineInitializationStatus{InfrastructureProvisioned: ptr.To(true)}}}
	clk.SetTime(clk.Now().Add(2 * time.Hour))
	res, err = r.renewServedToken(ctx, cfg, provisioned, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeZero())
	g.Expect(token()).To(Equal(second), "the host has its copy: not renewed")
	g.Expect(status(second)).To(Equal(http.StatusForbidden), "a host booting after expiry is refused")
}

// TestUserDataConfigHasNoTokenToRenew: a config that fits in user data is
// left alone.
func TestUserDataConfigHasNoTokenToRenew(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := &bootstrapv1.OpenShiftConfig{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	r := &Reconciler{Client: env.Client, APIReader: env.Client, IgnitionServer: ignitionServer}
	data, err := r.writeOwnedSecret(ctx, cfg, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "ocp"}}, cfg.Name, clusterv1.ClusterSecretType,
		map[string][]byte{"value": []byte(`{"ignition":{"version":"3.4.0"}}`), "format": []byte("ignition")})
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Status.DataSecretName = ptr.To(data.Name)
	res, err := r.renewServedToken(ctx, cfg, &clusterv1.Machine{}, &clusterv1.Cluster{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeZero())
}

package infraenv_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestImageURLs follows an InfraEnv's discovery image: its ISO URL and boot
// artifacts are minted and served; an image-affecting edit (SSH key, NTP
// sources, a selected NMStateConfig created or edited) mints a new URL and
// createdTime, the old URL then answering 410 Gone; edits that do not
// change the image (agentLabels, an NMStateConfig not selected) keep the
// URL; a URL near its expiry is renewed, the old one working until it
// expires.
func TestImageURLs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	g.Expect(env.Client.Create(ctx, pullSecret(ns, "pull-secret"))).To(Succeed())
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"},
		Spec: agentinstallv1.InfraEnvSpec{
			PullSecretRef:              &corev1.LocalObjectReference{Name: "pull-secret"},
			SSHAuthorizedKey:           "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFirstKeyFirstKeyFirstKeyFirstKeyFirstKey00 first",
			AgentLabels:                map[string]string{"rack": "r1"},
			NMStateConfigLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"lab": ns}},
		}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie)).To(Succeed())
		prefix := "http://" + serviceAddr + "/images/infra-envs/" + string(ie.UID) + "/"
		g.Expect(ie.Status.ISODownloadURL).To(HavePrefix(prefix + "discovery.iso?"))
		g.Expect(ie.Status.BootArtifacts.KernelURL).To(HavePrefix(prefix + "kernel?"))
		g.Expect(ie.Status.BootArtifacts.InitrdURL).To(HavePrefix(prefix + "initrd?"))
		g.Expect(ie.Status.BootArtifacts.IpxeScriptURL).To(HavePrefix(prefix + "ipxe-script?"))
		g.Expect(ie.Status.CreatedTime).To(HaveValue(HaveField("Time", BeTemporally("==", clk.Now()))))
		g.Expect(ie.Status.AgentLabelSelector.MatchLabels).To(Equal(map[string]string{agentinstallv1.InfraEnvNameLabel: "lab"}))
		g.Expect(ie.Status.Conditions).To(ContainElement(And(HaveField("Type", agentinstallv1.ConditionType("ImageCreated")),
			HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "InfraEnvAvailable"),
			HaveField("Message", "InfraEnv is available: Image has been created"))))
	}).Should(Succeed())
	g.Eventually(func() int { return get(ie.Status.ISODownloadURL) }).Should(Equal(http.StatusOK), "the agent service serves the ISO")
	g.Expect(get(ie.Status.BootArtifacts.IpxeScriptURL)).To(Equal(http.StatusOK))

	// Edits that leave the image alone keep its URL.
	url, created := ie.Status.ISODownloadURL, ie.Status.CreatedTime
	clk.Step(time.Minute)
	update(g, ie, func(ie *agentinstallv1.InfraEnv) { ie.Spec.AgentLabels = map[string]string{"rack": "r2"} })
	g.Expect(env.Client.Create(ctx, nmStateConfig(ns, "elsewhere", map[string]string{"lab": "other"}, "eth0"))).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie)).To(Succeed())
		g.Expect(ie.Status.ISODownloadURL).To(Equal(url))
		g.Expect(ie.Status.CreatedTime).To(Equal(created))
	}).WithTimeout(time.Second).Should(Succeed())

	// Each image-affecting edit mints a new URL; the old one is gone.
	selected := nmStateConfig(ns, "node-0", map[string]string{"lab": ns}, "eth0")
	for _, edit := range []struct {
		name string
		do   func()
	}{
		{"sshAuthorizedKey", func() {
			update(g, ie, func(ie *agentinstallv1.InfraEnv) {
				ie.Spec.SSHAuthorizedKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAISecondKeySecondKeySecondKeySecondKeySecond second"
			})
		}},
		{"additionalNTPSources", func() {
			update(g, ie, func(ie *agentinstallv1.InfraEnv) { ie.Spec.AdditionalNTPSources = []string{"ntp.example.com"} })
		}},
		{"a selected NMStateConfig created", func() { g.Expect(env.Client.Create(ctx, selected)).To(Succeed()) }},
		{"a selected NMStateConfig edited", func() {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(selected), selected)).To(Succeed())
			selected.Spec.Interfaces[0].MacAddress = "52:54:00:00:00:02"
			g.Expect(env.Client.Update(ctx, selected)).To(Succeed())
		}},
	} {
		old := ie.Status.ISODownloadURL
		clk.Step(time.Minute)
		edit.do()
		ie = waitNewImage(g, ie, old)
		g.Expect(ie.Status.CreatedTime.Time).To(BeTemporally("==", clk.Now()), edit.name)
		g.Expect(get(old)).To(Equal(http.StatusGone), "the URL before %s", edit.name)
		g.Expect(get(ie.Status.ISODownloadURL)).To(Equal(http.StatusOK), "the URL after %s", edit.name)
	}

	// Within a day of its expiry (URLs last a week) an image gets new URLs
	// at its next reconcile; the old ones work until they expire.
	old := ie.Status.ISODownloadURL
	clk.Step(6*24*time.Hour + time.Minute)
	update(g, ie, func(ie *agentinstallv1.InfraEnv) { ie.Spec.AgentLabels = map[string]string{"rack": "r3"} })
	ie = waitNewImage(g, ie, old)
	g.Expect(ie.Status.CreatedTime.Time).To(BeTemporally("==", clk.Now()))
	g.Expect(get(old)).To(Equal(http.StatusOK), "the same image, its URL not yet expired")
	clk.Step(24 * time.Hour)
	g.Expect(get(old)).To(Equal(http.StatusForbidden), "expired")
	g.Expect(get(ie.Status.ISODownloadURL)).To(Equal(http.StatusOK))
}

// TestImageNotCreated checks ImageCreated when the image cannot be made:
// the service's error (a missing pull secret) and the user's (an
// NMStateConfig mapping an interface to no MAC), each without an ISO URL,
// and the image made once the NMStateConfig is fixed.
func TestImageNotCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	noSecret := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-secret"},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "missing"}}}
	g.Expect(env.Client.Create(ctx, noSecret)).To(Succeed())
	expectImageCreated(g, noSecret, corev1.ConditionFalse, "ImageCreationError",
		`Failed to create image due to an internal error: secrets "missing" not found`)
	g.Expect(noSecret.Status.ISODownloadURL).To(BeEmpty())
	g.Expect(noSecret.Status.CreatedTime).To(BeNil())

	g.Expect(env.Client.Create(ctx, pullSecret(ns, "pull-secret"))).To(Succeed())
	nm := nmStateConfig(ns, "node-0", map[string]string{"lab": ns}, "eth1")
	g.Expect(env.Client.Create(ctx, nm)).To(Succeed())
	bad := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-nmstate"},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			NMStateConfigLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"lab": ns}}}}
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	expectImageCreated(g, bad, corev1.ConditionFalse, "ImageCreationError",
		"Failed to create image: mac-interface mapping for interface eth0 is missing and not a physical interface")
	g.Expect(bad.Status.ISODownloadURL).To(BeEmpty())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(nm), nm)).To(Succeed())
	nm.Spec.Interfaces[0].Name = "eth0"
	g.Expect(env.Client.Update(ctx, nm)).To(Succeed())
	expectImageCreated(g, bad, corev1.ConditionTrue, "InfraEnvAvailable", "InfraEnv is available: Image has been created")
	g.Expect(bad.Status.ISODownloadURL).NotTo(BeEmpty())
}

func pullSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}`)}}
}

// nmStateConfig configures eth0 statically, its MAC mapped to nic.
func nmStateConfig(ns, name string, labels map[string]string, nic string) *agentinstallv1.NMStateConfig {
	return &agentinstallv1.NMStateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: agentinstallv1.NMStateConfigSpec{
			Interfaces: []*agentinstallv1.Interface{{Name: nic, MacAddress: "52:54:00:00:00:01"}},
			NetConfig: &runtime.RawExtension{Raw: []byte(`{"interfaces":[{"name":"eth0","type":"ethernet","state":"up",` +
				`"ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"192.168.111.20","prefix-length":24}]}}]}`)},
		}}
}

func update(g Gomega, ie *agentinstallv1.InfraEnv, edit func(*agentinstallv1.InfraEnv)) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie); err != nil {
			return err
		}
		edit(ie)
		return env.Client.Update(ctx, ie)
	}).Should(Succeed())
}

// waitNewImage waits for ie's ISO URL to be other than old (and set).
func waitNewImage(g Gomega, ie *agentinstallv1.InfraEnv, old string) *agentinstallv1.InfraEnv {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ie), ie)).To(Succeed())
		g.Expect(ie.Status.ISODownloadURL).NotTo(BeEmpty())
		g.Expect(ie.Status.ISODownloadURL).NotTo(Equal(old))
	}).Should(Succeed())
	return ie
}

func expectImageCreated(g Gomega, ie *agentinstallv1.InfraEnv, status corev1.ConditionStatus, reason, msg string) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ie), ie)).To(Succeed())
		g.Expect(ie.Status.Conditions).To(ContainElement(And(HaveField("Type", agentinstallv1.ConditionType("ImageCreated")),
			HaveField("Status", status), HaveField("Reason", reason), HaveField("Message", msg))))
	}).Should(Succeed())
}

// get fetches url and returns the status code (0 when it cannot).
func get(url string) int {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

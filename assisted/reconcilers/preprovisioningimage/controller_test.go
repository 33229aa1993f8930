package preprovisioningimage_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/reconcilers/preprovisioningimage"
	"github.com/metalshift/metalshift/imageservice"
)

// hosts counts the hosts the tests create: each has its own boot MAC, which
// is unique on the hub.
var hosts atomic.Int32

// hostWithImage creates a host and its PreprovisioningImage, as the host
// engine does.
func hostWithImage(g Gomega, ns, name string, labels map[string]string, arch string) *metal3v1.PreprovisioningImage {
	ctx := context.Background()
	n := hosts.Add(1)
	host := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: metal3v1.BareMetalHostSpec{BootMACAddress: fmt.Sprintf("52:54:00:00:%02x:%02x", n>>8, n&0xff),
			BMC: metal3v1.BMCDetails{Address: "redfish-virtualmedia://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())
	ppi := &metal3v1.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3v1.PreprovisioningImageSpec{Architecture: arch, AcceptFormats: []metal3v1.ImageFormat{metal3v1.ImageFormatISO}}}
	g.Expect(env.Client.Create(ctx, ppi)).To(Succeed())
	return ppi
}

func ready(g Gomega, ppi *metal3v1.PreprovisioningImage) string {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ppi), ppi)).To(Succeed())
	c := meta.FindStatusCondition(ppi.Status.Conditions, metal3v1.ImageReadyCondition)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason + ": " + c.Message
}

// TestServesTheInfraEnvImage: the image of a host labelled for an InfraEnv
// waits for the InfraEnv, then for its converged-flow image (the InfraEnv
// annotated enable-ironic-agent, whose ISO carries the deploy server's URL
// and a lookup credential for the ISO's path), then is that ISO.
func TestServesTheInfraEnvImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ppi := hostWithImage(g, ns, "host-0", map[string]string{agentinstallv1.InfraEnvNameLabel: "lab"}, "x86_64")
	g.Eventually(func(g Gomega) string { return ready(g, ppi) }, 30*time.Second).Should(Equal(
		"False " + preprovisioningimage.ReasonWaitingForInfraEnvImage + ": InfraEnv " + ns + "/lab not found"))
	g.Expect(ppi.Finalizers).To(ContainElement(preprovisioningimage.Finalizer))
	g.Expect(ppi.Status.ImageUrl).To(BeEmpty())

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}`)}})).To(Succeed())
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, CpuArchitecture: "x86_64"}}
	g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
	g.Eventually(func(g Gomega) string { return ready(g, ppi) }, 30*time.Second).Should(Equal(
		"True " + preprovisioningimage.ReasonInfraEnvAvailable + ": Image has been created"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie)).To(Succeed())
	g.Expect(ie.Annotations).To(HaveKeyWithValue(agentinstallv1.EnableIronicAgentAnnotation, "true"))
	g.Expect(ppi.Status.ImageUrl).To(Equal(ie.Status.ISODownloadURL))
	g.Expect(ppi.Status.Format).To(Equal(metal3v1.ImageFormatISO))
	g.Expect(ppi.Status.Architecture).To(Equal("x86_64"))

	// The ISO: discovery for the InfraEnv, and the lookup section.
	resp, err := http.Get(ppi.Status.ImageUrl)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	data, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := imageservice.ReadISOHostConfig(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Discovery).NotTo(BeNil())
	g.Expect(cfg.Discovery.InfraEnvID).To(Equal(string(ie.UID)))
	g.Expect(cfg.Lookup).NotTo(BeNil())
	g.Expect(cfg.Lookup.EngineURL).To(Equal(deployURL))
	g.Expect(cfg.Lookup.Scope).To(Equal("/images/infra-envs/" + string(ie.UID) + "/discovery.iso"))
	// The lookup credential expires with the image's URL.
	imageURL, err := url.Parse(ppi.Status.ImageUrl)
	g.Expect(err).NotTo(HaveOccurred())
	expires, err := strconv.ParseInt(imageURL.Query().Get("expires"), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deployapi.VerifyLookupToken(key, cfg.Lookup.Scope, cfg.Lookup.Token, time.Unix(expires, 0))).To(Succeed())
	g.Expect(deployapi.VerifyLookupToken(key, cfg.Lookup.Scope, cfg.Lookup.Token, time.Unix(expires+1, 0))).To(MatchError(deployapi.ErrBadToken))

	// Another architecture than the InfraEnv's.
	arm := hostWithImage(g, ns, "host-1", map[string]string{agentinstallv1.InfraEnvNameLabel: "lab"}, "aarch64")
	g.Eventually(func(g Gomega) string { return ready(g, arm) }, 30*time.Second).Should(Equal(
		"False " + preprovisioningimage.ReasonInfraEnvArchMismatch + ": InfraEnv lab is for x86_64 hosts, the host is aarch64"))
	g.Expect(meta.IsStatusConditionTrue(arm.Status.Conditions, metal3v1.ImageErrorCondition)).To(BeTrue())
	g.Expect(arm.Status.ImageUrl).To(BeEmpty())
}

// TestLeavesOtherImagesAlone: a host without the label is not the agent
// service's: its image gets no status and no finalizer, and a host whose
// label goes away has its image released.
func TestLeavesOtherImagesAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	other := hostWithImage(g, ns, "other", nil, "")
	labelled := hostWithImage(g, ns, "labelled", map[string]string{agentinstallv1.InfraEnvNameLabel: "nowhere"}, "")
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(labelled), labelled)).To(Succeed())
		return labelled.Finalizers
	}, 30*time.Second).Should(ContainElement(preprovisioningimage.Finalizer))
	g.Consistently(func(g Gomega) string { return ready(g, other) }, 2*time.Second).Should(BeEmpty())
	g.Expect(other.Finalizers).To(BeEmpty())

	host := &metal3v1.BareMetalHost{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(labelled), host)).To(Succeed())
	host.Labels = nil
	g.Expect(env.Client.Update(ctx, host)).To(Succeed())
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(labelled), labelled)).To(Succeed())
		return labelled.Finalizers
	}, 30*time.Second).ShouldNot(ContainElement(preprovisioningimage.Finalizer))
}

// TestStatusWriteLandsOverAnotherWriter: the host engine writes the
// image's spec while this reconciler works from the copy it read; the
// status the reconcile made still lands (it used to be dropped on the
// conflict, with no requeue). The reconciler runs here on a client that
// shows it the host labelled and the image with its finalizer, and
// changes the image's spec behind its read; the manager's reconciler,
// seeing the host unlabelled, writes no status on this image.
func TestStatusWriteLandsOverAnotherWriter(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ppi := hostWithImage(g, ns, "host-0", nil, "")
	key := client.ObjectKeyFromObject(ppi)
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, k, o, opts...); err != nil {
				return err
			}
			switch o := o.(type) {
			case *metal3v1.BareMetalHost:
				o.Labels = map[string]string{agentinstallv1.InfraEnvNameLabel: "lab"}
			case *metal3v1.PreprovisioningImage:
				// As after an earlier reconcile of this reconciler's.
				o.Finalizers = []string{preprovisioningimage.Finalizer}
				// The other writer, after the read.
				other := o.DeepCopy()
				other.Finalizers = nil
				other.Spec.Architecture = "x86_64"
				if err := env.Client.Update(ctx, other); err != nil {
					return err
				}
				g.Expect(other.ResourceVersion).NotTo(Equal(o.ResourceVersion))
			}
			return nil
		},
	})
	r := &preprovisioningimage.Reconciler{Client: c}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(BeZero())
	g.Expect(ready(g, ppi)).To(Equal("False " + preprovisioningimage.ReasonWaitingForInfraEnvImage + ": InfraEnv " + ns + "/lab not found"))
	g.Expect(ppi.Spec.Architecture).To(Equal("x86_64"), "the other writer's spec stays")
}

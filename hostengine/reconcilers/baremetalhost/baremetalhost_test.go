package baremetalhost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/metalshift/metalshift/agent/configdrive"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/machine"
	simredfish "github.com/metalshift/metalshift/sim/redfish"
)

// TestVirtualMediaLifecycle: register → inspect → available → provision
// (image + userData) → provisioned → deprovision → available → delete.
func TestVirtualMediaLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	img := newImageServer(t, 3<<20+123, false)

	host := createHost(t, lab, 0, ns, true, nil)
	waitState(t, host, metal3v1.StateAvailable)
	g.Expect(host.Status.OperationalStatus).To(Equal(metal3v1.OperationalStatusOK))
	g.Expect(host.Status.GoodCredentials.Reference).NotTo(BeNil())
	hw := host.Status.HardwareDetails
	g.Expect(hw).NotTo(BeNil())
	g.Expect(hw.CPU.Count).To(Equal(32))
	g.Expect(hw.CPU.Arch).To(Equal("x86_64"))
	g.Expect(hw.RAMMebibytes).To(Equal(131072))
	g.Expect(hw.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)))
	g.Expect(hw.Storage).To(ContainElement(And(HaveField("Name", "/dev/sda"), HaveField("SizeBytes", metal3v1.Capacity(64<<30)))))
	g.Expect(hw.SystemVendor.Manufacturer).To(Equal("Metalshift Sim"))
	g.Expect(hw.Firmware.BIOS.Version).To(Equal("2.4.1"))
	g.Expect(host.Spec.Architecture).To(Equal("x86_64"))
	g.Expect(host.Status.OperationHistory.Register.End.IsZero()).To(BeFalse())
	g.Expect(host.Status.OperationHistory.Inspect.End.IsZero()).To(BeFalse())
	g.Expect(m.PoweredOn()).To(BeFalse(), "online: false keeps an available host off")

	ud := userDataSecret(t, ns, "worker-user-data", `{"ignition":{"version":"3.4.0"}}`)
	update(t, host, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image = img.Image()
		h.Spec.UserData = ud
		h.Spec.Online = true
	})
	waitState(t, host, metal3v1.StateProvisioned)
	g.Expect(host.Status.Provisioning.Image.URL).To(Equal(img.Image().URL))
	g.Expect(host.Status.PoweredOn).To(BeTrue())
	g.Expect(host.Status.OperationHistory.Provision.End.IsZero()).To(BeFalse())
	g.Eventually(m.BootedOS).Should(Equal(sim.OSDisk), func() string { return fmt.Sprintf("the host boots its disk; console: %q", lab.Firmware.Log(m.ID)) })
	g.Expect(m.Media()).To(BeEmpty(), "the deploy ISO is ejected")
	disk := m.DiskByName("/dev/sda")
	written := make([]byte, len(img.Data))
	_, err := disk.ReadAt(written, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(Equal(img.Data), "the image is on the smallest disk of at least 4 GiB")
	cd, ok, err := configdrive.Read(disk, disk.SizeBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(string(cd.UserData)).To(Equal(`{"ignition":{"version":"3.4.0"}}`))
	g.Expect(img.Downloads.Load()).To(BeEquivalentTo(1))

	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = nil; h.Spec.UserData = nil; h.Spec.Online = false })
	waitState(t, host, metal3v1.StateAvailable)
	g.Expect(host.Status.Provisioning.Image.URL).To(BeEmpty())
	_, ok, err = configdrive.Read(disk, disk.SizeBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "metadata cleaning wiped the config drive")
	g.Eventually(m.PoweredOn).Should(BeFalse())
	g.Expect(host.Status.OperationHistory.Deprovision.End.IsZero()).To(BeFalse())

	expectNoCanary(t, e, ns, host)
	g.Expect(env.Client.Delete(ctx, host)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)) }, 30*time.Second).Should(BeTrue())
}

// TestPXEWithRootDeviceHints provisions over PXE (redfish://) onto the disk the hints choose.
func TestPXEWithRootDeviceHints(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	img := newImageServer(t, 1<<20, false)
	rot := true
	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image = img.Image()
		h.Spec.Online = true
		h.Spec.RootDeviceHints = &metal3v1.RootDeviceHints{Rotational: &rot}
		h.Spec.AutomatedCleaningMode = metal3v1.CleaningModeDisabled
	})
	waitState(t, host, metal3v1.StateProvisioned)
	sdb := m.DiskByName("/dev/sdb")
	head := make([]byte, 64)
	_, _ = sdb.ReadAt(head, 0)
	g.Expect(head).To(Equal(img.Data[:64]), "the image went to the rotational disk")
	g.Expect(m.DiskByName("/dev/sda").Writes()).To(BeZero())
	g.Expect(m.Override().Target).To(Equal(machine.BootHdd), "console: %v", lab.Firmware.Log(m.ID))
	g.Expect(lab.Firmware.Log(m.ID)).To(ContainElement(ContainSubstring("Deploy agent started")))

	// automatedCleaningMode: disabled leaves the disk alone on deprovisioning.
	writes := sdb.Writes()
	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = nil; h.Spec.Online = false })
	waitState(t, host, metal3v1.StateAvailable)
	g.Expect(sdb.Writes()).To(Equal(writes))
	g.Eventually(m.PoweredOn).Should(BeFalse())
}

// TestCredentials: a missing Secret and wrong credentials are registration
// errors that say what to fix; fixing them resumes registration.
func TestCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 2)

	missing := &metal3v1.BareMetalHost{}
	hostA, _ := lab.Host(lab.Machines[0], ns, true)
	hostA.DeepCopyInto(missing)
	g.Expect(env.Client.Create(ctx, missing)).To(Succeed())
	g.Eventually(func(g Gomega) {
		h := get(g, missing)
		g.Expect(h.Status.ErrorType).To(Equal(metal3v1.RegistrationError))
		g.Expect(h.Status.ErrorMessage).To(ContainSubstring("Secret " + ns + "/host-0-bmc-secret not found: create it"))
		g.Expect(h.Status.OperationalStatus).To(Equal(metal3v1.OperationalStatusError))
		g.Expect(h.Status.ErrorCount).To(BeNumerically(">=", 1))
	}).Should(Succeed())

	// Wrong from the start: a host whose BMC accepted its credentials
	// may be past registering before they change, and fail later steps
	// (power) instead.
	wrong, wrongSecret := lab.Host(lab.Machines[1], ns, true)
	wrongSecret.StringData["password"] = "wrong-" + canary
	g.Expect(env.Client.Create(ctx, wrongSecret)).To(Succeed())
	g.Expect(env.Client.Create(ctx, wrong)).To(Succeed())
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "host-1-bmc-secret"}, sec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		h := get(g, wrong)
		g.Expect(h.Status.ErrorType).To(Equal(metal3v1.RegistrationError))
		g.Expect(h.Status.ErrorMessage).To(ContainSubstring("refused the credentials in Secret host-1-bmc-secret"))
		g.Expect(conditions.GetReason(h, baremetalhost.BMCReachableCondition)).To(Equal(baremetalhost.ReasonBMCCredentialsRefused))
	}).Should(Succeed())
	g.Expect(conditions.Get(get(g, missing), baremetalhost.BMCReachableCondition)).To(BeNil(), "a missing Secret is no BMC trouble")

	sec.Data["password"] = []byte(canary)
	g.Expect(env.Client.Update(ctx, sec)).To(Succeed())
	waitState(t, wrong, metal3v1.StateAvailable)
	g.Expect(wrong.Status.ErrorType).To(BeEmpty())
	g.Expect(wrong.Status.ErrorCount).To(BeZero())

	_, secret := lab.Host(lab.Machines[0], ns, true)
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	waitState(t, missing, metal3v1.StateAvailable)

	expectNoCanary(t, e, ns, missing, wrong)
	evs := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", "RegistrationError"), HaveField("Type", corev1.EventTypeWarning))))
}

// TestBMCDownThenBack: an unreachable BMC backs off and recovers.
func TestBMCDownThenBack(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	lab.BMC.SetFaults(simredfish.Faults{Down: true})
	host := createHost(t, lab, 0, ns, true, nil)
	g.Eventually(func(g Gomega) {
		h := get(g, host)
		g.Expect(h.Status.ErrorMessage).To(ContainSubstring("did not answer"))
		g.Expect(h.Status.ErrorCount).To(BeNumerically(">=", 2), "retries back off")
		c := conditions.Get(h, baremetalhost.BMCReachableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(*c).To(MatchFields(IgnoreExtras, Fields{"Status": Equal(metav1.ConditionFalse), "Reason": Equal(baremetalhost.ReasonBMCNotAnswering),
			"Message": Equal(h.Status.ErrorMessage)}), "the condition names the BMC trouble while it lasts")
	}, 30*time.Second).Should(Succeed())
	lab.BMC.SetFaults(simredfish.Faults{})
	waitState(t, host, metal3v1.StateAvailable)
	g.Expect(host.Status.ErrorCount).To(BeZero())
	g.Expect(conditions.IsTrue(host, baremetalhost.BMCReachableCondition)).To(BeTrue(), "and clears after: %v", host.Status.Conditions)
	g.Expect(conditions.GetReason(host, baremetalhost.BMCReachableCondition)).To(Equal(baremetalhost.ReasonNoBMCTrouble))
}

// TestPowerDriftAndReboot: spec.online is enforced; reboot.metal3.io power-cycles once.
func TestPowerDriftAndReboot(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.Online = true })
	waitState(t, host, metal3v1.StateAvailable)
	g.Eventually(m.PoweredOn, 30*time.Second).Should(BeTrue())

	m.PowerOff() // someone pulls the power behind the engine's back
	g.Eventually(m.PoweredOn, 30*time.Second).Should(BeTrue(), "the engine corrects the drift")

	boots := m.Boots()
	update(t, host, func(h *metal3v1.BareMetalHost) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metal3v1.RebootAnnotationPrefix] = ""
	})
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, host).Annotations).NotTo(HaveKey(metal3v1.RebootAnnotationPrefix))
	}, 30*time.Second).Should(Succeed())
	g.Expect(m.Boots()).To(Equal(boots+1), "one reboot")

	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Online = false })
	g.Eventually(m.PoweredOn, 30*time.Second).Should(BeFalse())
	g.Eventually(func(g Gomega) { g.Expect(get(g, host).Status.PoweredOn).To(BeFalse()) }).Should(Succeed())
}

// TestDetachedAndExternallyProvisioned: a detached host is left alone and
// deleted without touching the hardware; an externally provisioned host is
// only power-managed.
func TestDetachedAndExternallyProvisioned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 2)

	ext := createHost(t, lab, 1, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.ExternallyProvisioned = true; h.Spec.Online = true })
	waitState(t, ext, metal3v1.StateExternallyProvisioned)
	g.Eventually(lab.Machines[1].PoweredOn, 30*time.Second).Should(BeTrue())
	g.Expect(lab.Machines[1].BootedOS()).NotTo(Equal(sim.OSDeployAgent))

	host := createHost(t, lab, 0, ns, true, nil)
	waitState(t, host, metal3v1.StateAvailable)
	update(t, host, func(h *metal3v1.BareMetalHost) {
		h.Annotations = map[string]string{metal3v1.DetachedAnnotation: ""}
		h.Spec.Online = true
	})
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, host).Status.OperationalStatus).To(Equal(metal3v1.OperationalStatusDetached))
	}).Should(Succeed())
	g.Consistently(lab.Machines[0].PoweredOn, 2*time.Second).Should(BeFalse(), "a detached host's power is not managed")

	g.Expect(env.Client.Delete(ctx, host)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)) }).Should(BeTrue())
}

// TestDeleteDuringProvisioning: deleting a host whose agent is busy powers
// it off and releases it; no finalizer is left behind.
func TestDeleteDuringProvisioning(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	img := newImageServer(t, 1<<20, true) // never finishes downloading
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	waitState(t, host, metal3v1.StateProvisioning)
	g.Eventually(img.Downloads.Load, 30*time.Second).Should(BeEquivalentTo(1), "the agent is writing")

	g.Expect(env.Client.Delete(ctx, host)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)) }, 30*time.Second).Should(BeTrue())
	g.Expect(lab.Machines[0].PoweredOn()).To(BeFalse())
}

// TestEngineRestartMidProvisioning: an engine that restarts while the agent
// writes resumes without booting the agent again or writing the disk twice.
func TestEngineRestartMidProvisioning(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	// The new engine listens where the first did: reserved, so nothing
	// takes the port in between.
	e := startEngine(t, testenv.ReservedAddr(t), nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	img := newImageServer(t, 2<<20, true)
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	waitState(t, host, metal3v1.StateProvisioning)
	g.Eventually(img.Downloads.Load, 30*time.Second).Should(BeEquivalentTo(1))
	boots := m.Boots()

	e.Stop()
	e2 := startEngine(t, e.Addr, e.Key, e.Logs)
	close(img.Gate) // the download completes while the new engine runs
	waitState(t, host, metal3v1.StateProvisioned)
	g.Expect(img.Downloads.Load()).To(BeEquivalentTo(1), "the image was downloaded and written once")
	g.Expect(m.Boots()).To(Equal(boots+1), "only the final boot from disk")
	_ = e2
	written := make([]byte, len(img.Data))
	_, _ = m.DiskByName("/dev/sda").ReadAt(written, 0)
	g.Expect(written).To(Equal(img.Data))
}

// TestBadImageChecksum surfaces the agent's failure as a provisioning error.
func TestBadImageChecksum(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	img := newImageServer(t, 1<<20, false)
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image = img.Image()
		h.Spec.Image.Checksum = strings.Repeat("0", 64)
		h.Spec.Online = true
	})
	g.Eventually(func(g Gomega) {
		h := get(g, host)
		g.Expect(h.Status.ErrorType).To(Equal(metal3v1.ProvisioningError))
		g.Expect(h.Status.ErrorMessage).To(ContainSubstring("checksum mismatch"))
	}, 60*time.Second).Should(Succeed())
}

// TestVirtualMediaFault: a BMC that refuses the deploy ISO is a
// provisioning error that says so, and provisioning resumes once it accepts.
func TestVirtualMediaFault(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	m.SetMediaFault(true)
	img := newImageServer(t, 1<<20, false)
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	g.Eventually(func(g Gomega) {
		h := get(g, host)
		g.Expect(h.Status.ErrorType).To(Equal(metal3v1.ProvisioningError))
		g.Expect(h.Status.ErrorMessage).To(ContainSubstring("could not attach the deploy image"))
		g.Expect(conditions.IsFalse(h, baremetalhost.BMCReachableCondition)).To(BeTrue())
		g.Expect(conditions.GetReason(h, baremetalhost.BMCReachableCondition)).To(Equal(baremetalhost.ReasonBMCMediaFailed))
	}, 60*time.Second).Should(Succeed())
	m.SetMediaFault(false)
	waitState(t, host, metal3v1.StateProvisioned)
	g.Expect(conditions.IsTrue(host, baremetalhost.BMCReachableCondition)).To(BeTrue(), "cleared once the BMC took the image: %v", host.Status.Conditions)
}

// TestWatchFilter: an engine started with a watch filter (sharding hosts
// across managers, as every controller of the hub) manages only hosts
// labelled cluster.x-k8s.io/watch-filter=<value>.
func TestWatchFilter(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil, func(o *hostengine.Options) { o.WatchFilterValue = "shard-a" })
	lab := startLab(t, e, 2)
	mine := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Labels = map[string]string{clusterv1.WatchLabel: "shard-a"}
	})
	other := createHost(t, lab, 1, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Labels = map[string]string{clusterv1.WatchLabel: "shard-b"}
	})
	waitState(t, mine, metal3v1.StateAvailable)
	g.Consistently(func(g Gomega) {
		h := get(g, other)
		g.Expect(h.Status.Provisioning.State).To(BeEmpty(), "another shard's host was reconciled")
		g.Expect(h.Finalizers).To(BeEmpty())
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestBadNetworkData: a host whose preprovisioning network data the live
// image could not use is not booted; its status says why (the Secret, the
// field), and fixing the Secret lets it provision.
func TestBadNetworkData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	img := newImageServer(t, 1<<20, false)
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image, h.Spec.Online = img.Image(), true
		h.Spec.PreprovisioningNetworkDataName = "net"
	})
	errorMessage := func(g Gomega) string { return get(g, host).Status.ErrorMessage }
	g.Eventually(errorMessage, 30*time.Second).Should(And(ContainSubstring("The deploy image cannot be made for this host"),
		ContainSubstring(`Secret `+ns+`/net`), ContainSubstring("not found")))

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: ns},
		StringData: map[string]string{"nmstate": "interfaces:\n- name: eth0\n  mac-address: not-a-mac\n"}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	g.Eventually(errorMessage, 30*time.Second).Should(ContainSubstring("secret " + ns + "/net, key nmstate: interfaces[0].mac-address"))
	g.Expect(lab.Machines[0].Boots()).To(BeZero(), "the host was not booted with an image that cannot work")

	secret.StringData = map[string]string{"nmstate": "interfaces:\n- name: eth0\n  ipv4: {enabled: true, dhcp: true}\n"}
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	waitState(t, host, metal3v1.StateProvisioned)
	g.Expect(host.Status.ErrorMessage).To(BeEmpty())
}

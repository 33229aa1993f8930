package bmac

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

func agentWithDisks() *agentinstallv1.Agent {
	a := &agentinstallv1.Agent{}
	a.Status.Inventory = agentinstallv1.HardwareInventory{
		Hostname: "node-0",
		Memory:   agentinstallv1.HostMemory{PhysicalBytes: 16 << 30},
		Cpu:      agentinstallv1.HostCPU{Count: 8, Architecture: "x86_64", ClockMegahertz: 2400},
		Interfaces: []agentinstallv1.HostInterface{{Name: "eth0", MacAddress: "52:54:00:00:00:01", IPV4Addresses: []string{"192.0.2.10/24"},
			SpeedMbps: 10000}},
		Disks: []agentinstallv1.HostDisk{
			{ID: "/dev/disk/by-id/a", Path: "/dev/sda", ByPath: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1", Serial: "S1", Wwn: "0x1", SizeBytes: 1 << 40, DriveType: "SSD"},
			{ID: "/dev/disk/by-id/b", Path: "/dev/sdb", Serial: "S2", Wwn: "0x2", SizeBytes: 2 << 40, DriveType: "HDD"},
		},
	}
	return a
}

func TestDiskFromHints(t *testing.T) {
	a := agentWithDisks()
	for name, tc := range map[string]struct {
		hints *metal3v1.RootDeviceHints
		want  string
	}{
		"none":                  {nil, ""},
		"empty":                 {&metal3v1.RootDeviceHints{}, ""},
		"device name":           {&metal3v1.RootDeviceHints{DeviceName: "/dev/sdb"}, "/dev/disk/by-id/b"},
		"by-path name":          {&metal3v1.RootDeviceHints{DeviceName: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"}, "/dev/disk/by-id/a"},
		"serial":                {&metal3v1.RootDeviceHints{SerialNumber: "S2"}, "/dev/disk/by-id/b"},
		"wwn":                   {&metal3v1.RootDeviceHints{WWN: "0x1"}, "/dev/disk/by-id/a"},
		"all must match":        {&metal3v1.RootDeviceHints{DeviceName: "/dev/sda", SerialNumber: "S2"}, ""},
		"no such device":        {&metal3v1.RootDeviceHints{DeviceName: "/dev/nvme0n1"}, ""},
		"name and serial agree": {&metal3v1.RootDeviceHints{DeviceName: "/dev/sdb", SerialNumber: "S2"}, "/dev/disk/by-id/b"},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(diskFromHints(a, tc.hints)).To(Equal(tc.want))
		})
	}
}

func TestHardwareDetails(t *testing.T) {
	g := NewWithT(t)
	g.Expect(hardwareDetails(&agentinstallv1.Agent{})).To(BeEmpty(), "no inventory, no details")
	hw := &metal3v1.HardwareDetails{}
	g.Expect(json.Unmarshal([]byte(hardwareDetails(agentWithDisks())), hw)).To(Succeed())
	g.Expect(hw.Hostname).To(Equal("node-0"))
	g.Expect(hw.RAMMebibytes).To(Equal(16 << 10))
	g.Expect(hw.CPU).To(And(HaveField("Count", 8), HaveField("Arch", "x86_64")))
	g.Expect(hw.NIC).To(ConsistOf(And(HaveField("MAC", "52:54:00:00:00:01"), HaveField("IP", "192.0.2.10"), HaveField("SpeedGbps", 10))))
	g.Expect(hw.Storage).To(HaveLen(2))
	g.Expect(hw.Storage[0]).To(And(HaveField("Name", "/dev/sda"), HaveField("SerialNumber", "S1"),
		HaveField("AlternateNames", ConsistOf("/dev/disk/by-path/pci-0000:00:1f.2-ata-1")), HaveField("Rotational", false)))
	g.Expect(hw.Storage[1].Rotational).To(BeTrue())
}

func TestBindFromAnnotation(t *testing.T) {
	late := &agentinstallv1.InfraEnv{}
	late.Name = "late"
	bound := late.DeepCopy()
	bound.Spec.ClusterRef = &agentinstallv1.ClusterReference{Namespace: "ns", Name: "cd"}
	for name, tc := range map[string]struct {
		ie      *agentinstallv1.InfraEnv
		ref     string
		want    *agentinstallv1.ClusterReference
		wantErr string
	}{
		"binds":               {late, "ns/other", &agentinstallv1.ClusterReference{Namespace: "ns", Name: "other"}, ""},
		"empty unbinds":       {late, "", nil, ""},
		"not namespace/name":  {late, "other", &agentinstallv1.ClusterReference{Namespace: "ns", Name: "y"}, `"other" is not <namespace>/<name>`},
		"InfraEnv with a ref": {bound, "ns/other", &agentinstallv1.ClusterReference{Namespace: "ns", Name: "y"}, "InfraEnv late has a clusterRef"},
		"another namespace": {late, "ns2/other", &agentinstallv1.ClusterReference{Namespace: "ns", Name: "y"},
			`metadata.annotations[bmac.agent-install.openshift.io/cluster-reference]: "ns2" is another namespace: a reference must stay in the BareMetalHost's namespace "ns"`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			a := &agentinstallv1.Agent{}
			a.Namespace = "ns"
			a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Namespace: "ns", Name: "y"}
			err := bindFromAnnotation(a, tc.ie, tc.ref)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(a.Spec.ClusterDeploymentName).To(Equal(tc.want))
		})
	}
}

func TestClusterReferenceCondition(t *testing.T) {
	late := &agentinstallv1.InfraEnv{}
	late.Name = "late"
	bound := late.DeepCopy()
	bound.Spec.ClusterRef = &agentinstallv1.ClusterReference{Namespace: "ns", Name: "cd"}
	tests := []struct {
		name   string
		ie     *agentinstallv1.InfraEnv
		ann    map[string]string
		status metav1.ConditionStatus // "": no condition
		reason string
		msg    string
	}{
		{name: "no annotation", ie: late},
		{name: "binds", ie: late, ann: map[string]string{ClusterReferenceAnnotation: "ns/cd"}, status: metav1.ConditionTrue,
			reason: ReasonClusterReferenceAccepted, msg: "The host's Agent is bound to ClusterDeployment ns/cd"},
		{name: "unbinds", ie: late, ann: map[string]string{ClusterReferenceAnnotation: ""}, status: metav1.ConditionTrue,
			reason: ReasonClusterReferenceAccepted, msg: "The host's Agent is unbound"},
		{name: "another namespace", ie: late, ann: map[string]string{ClusterReferenceAnnotation: "other/cd"}, status: metav1.ConditionFalse,
			reason: ReasonCrossNamespaceReference,
			msg: `metadata.annotations[bmac.agent-install.openshift.io/cluster-reference]: "other" is another namespace: ` +
				`a reference must stay in the BareMetalHost's namespace "ns": the host's Agent is not bound to it`},
		{name: "not namespace/name", ie: late, ann: map[string]string{ClusterReferenceAnnotation: "cd"}, status: metav1.ConditionFalse,
			reason: ReasonInvalidClusterReference, msg: `annotation bmac.agent-install.openshift.io/cluster-reference: "cd" is not <namespace>/<name>`},
		{name: "InfraEnv with a ref", ie: bound, ann: map[string]string{ClusterReferenceAnnotation: "ns/cd"}, status: metav1.ConditionFalse,
			reason: ReasonInvalidClusterReference,
			msg:    "annotation bmac.agent-install.openshift.io/cluster-reference is set, but InfraEnv late has a clusterRef: its Agents are bound to ns/cd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			host := &metal3v1.BareMetalHost{}
			host.Namespace, host.Annotations, host.Generation = "ns", tt.ann, 3
			c := clusterReferenceCondition(host, tt.ie)
			if tt.status == "" {
				g.Expect(c).To(BeNil())
				return
			}
			g.Expect(*c).To(Equal(metav1.Condition{Type: ClusterReferenceCondition, Status: tt.status, Reason: tt.reason, Message: tt.msg, ObservedGeneration: 3}))
		})
	}
}

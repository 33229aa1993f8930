package validations

import (
	"sort"
	"strings"
	"testing"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

func inventory(cores, ramGiB int64, addr string) *assistedapi.Inventory {
	return &assistedapi.Inventory{
		Hostname:   "host-a",
		CPU:        assistedapi.CPU{Count: cores, Architecture: "x86_64"},
		Memory:     assistedapi.Memory{PhysicalBytes: ramGiB * gib, UsableBytes: ramGiB * gib},
		Interfaces: []assistedapi.Interface{{Name: "eth0", IPV4Addresses: []string{addr}}},
		Disks:      []assistedapi.Disk{{Path: "/dev/sda", SizeBytes: 200e9, InstallationEligibility: assistedapi.InstallationEligibility{Eligible: true}}},
		Routes:     []assistedapi.Route{{Interface: "eth0", Destination: "0.0.0.0", Gateway: "192.168.111.1", Family: 2}},
	}
}

func boundInput(cores, ramGiB int64, role string) HostInput {
	return HostInput{
		Inventory: inventory(cores, ramGiB, "192.168.111.20/24"), Role: role, OpenshiftVersion: "4.20",
		InstallationDisk: "/dev/sda", Connected: true, Bound: true, MachineNetworks: []string{"192.168.111.0/24"},
		NTPSources:  []assistedapi.NTPSource{{SourceName: "pool", SourceState: assistedapi.NTPSourceSynced}},
		ClusterName: "c1", BaseDomain: "example.com",
	}
}

func get(t *testing.T, r Results, id string) Result {
	t.Helper()
	res, ok := r.Get(id)
	if !ok {
		t.Fatalf("validation %s missing from %+v", id, r)
	}
	return res
}

func expect(t *testing.T, r Results, id, status, msg string) {
	t.Helper()
	res := get(t, r, id)
	if res.Status != status || res.Message != msg {
		t.Errorf("%s = %s %q, want %s %q", id, res.Status, res.Message, status, msg)
	}
}

func ids(r Results, category string) []string {
	var out []string
	for _, res := range r[category] {
		out = append(out, res.ID)
	}
	return out
}

func TestHostRoleMinimums(t *testing.T) {
	small := boundInput(2, 8, "master")
	r := Host(small)
	expect(t, r, IDHasCPUCoresForRole, "failure", "Require at least 4 CPU cores for master role, found only 2")
	expect(t, r, IDHasMemoryForRole, "failure", "Require at least 16.00 GiB RAM for role master, found only 8.00 GiB")
	expect(t, r, IDHasMinCPUCores, "success", "Sufficient CPU cores")
	expect(t, r, IDHasMinMemory, "success", "Sufficient minimum RAM")

	small.Role = "worker"
	r = Host(small)
	expect(t, r, IDHasCPUCoresForRole, "success", "Sufficient CPU cores for role worker")
	expect(t, r, IDHasMemoryForRole, "success", "Sufficient RAM for role worker")
	if !r.Passing() {
		t.Errorf("2-core 8 GiB worker not passing: %+v", r.Failing())
	}

	arb := boundInput(2, 8, "arbiter")
	expect(t, Host(arb), IDHasCPUCoresForRole, "success", "Sufficient CPU cores for role arbiter")

	tiny := boundInput(1, 4, "worker")
	r = Host(tiny)
	expect(t, r, IDHasMinCPUCores, "failure", "The host is not eligible to participate in Openshift Cluster because the minimum required CPU cores for any role is 2, found only 1")
	expect(t, r, IDHasMinMemory, "failure", "The host is not eligible to participate in Openshift Cluster because the minimum required RAM for any role is 8.00 GiB, found only 4.00 GiB")

	auto := boundInput(2, 8, "")
	expect(t, Host(auto), IDHasCPUCoresForRole, "success", "Sufficient CPU cores for role auto-assign")
}

func TestHostSNOCoresByVersion(t *testing.T) {
	in := boundInput(4, 16, "master")
	in.SNO, in.UserManagedNetworking = true, true
	in.OpenshiftVersion = "4.21"
	expect(t, Host(in), IDHasCPUCoresForRole, "failure", "Require at least 8 CPU cores for master role, found only 4")
	in.OpenshiftVersion = "4.22"
	expect(t, Host(in), IDHasCPUCoresForRole, "success", "Sufficient CPU cores for role master")
}

func TestHostnames(t *testing.T) {
	in := boundInput(4, 16, "master")
	in.OtherHostnames = []string{"host-b", "host-c"}
	expect(t, Host(in), IDHostnameUnique, "success", "Hostname host-a is unique in cluster")
	expect(t, Host(in), IDHostnameValid, "success", "Hostname host-a is allowed")
	in.OtherHostnames = []string{"host-b", "host-a"}
	expect(t, Host(in), IDHostnameUnique, "failure", "Hostname host-a is not unique in cluster")
	in.Hostname = "master-0"
	expect(t, Host(in), IDHostnameUnique, "success", "Hostname master-0 is unique in cluster")
	in.Hostname = "localhost"
	expect(t, Host(in), IDHostnameValid, "failure", "The host name localhost is forbidden")
	in.Hostname = "Bad_Name"
	expect(t, Host(in), IDHostnameValid, "failure", "Hostname Bad_Name is forbidden, hostname should match pattern "+hostnamePattern)
}

func TestHostWithoutInventory(t *testing.T) {
	in := boundInput(4, 16, "master")
	in.Inventory = nil
	r := Host(in)
	expect(t, r, IDHasInventory, "failure", "Inventory has not been received for the host")
	expect(t, r, IDHasMinCPUCores, "pending", "Missing inventory")
	expect(t, r, IDHasMinMemory, "pending", "Missing inventory")
	expect(t, r, IDHasMinValidDisks, "pending", "Missing inventory")
	expect(t, r, IDHasCPUCoresForRole, "pending", "Missing inventory or role")
	expect(t, r, IDHasMemoryForRole, "pending", "Missing inventory or role")
	expect(t, r, IDHostnameUnique, "pending", "Missing inventory")
	expect(t, r, IDBelongsToMachineCIDR, "pending", "Missing inventory or machine network CIDR")
	expect(t, r, IDCompatibleWithClusterPlatform, "pending", "Missing inventory or platform isn't set")
}

func TestHostBoundCategories(t *testing.T) {
	r := Host(boundInput(4, 16, "master"))
	if !r.Passing() {
		t.Fatalf("healthy master not passing: %+v %+v", r.Failing(), r.Pending())
	}
	if got, want := ids(r, "hardware"), []string{
		"compatible-with-cluster-platform", "has-cpu-cores-for-role", "has-inventory", "has-memory-for-role",
		"has-min-cpu-cores", "has-min-memory", "has-min-valid-disks", "hostname-unique", "hostname-valid",
		"sufficient-installation-disk-speed",
	}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("hardware = %v, want %v", got, want)
	}
	if got, want := ids(r, "network"), []string{
		"api-domain-name-resolved-correctly", "api-int-domain-name-resolved-correctly", "apps-domain-name-resolved-correctly",
		"belongs-to-machine-cidr", "connected", "machine-cidr-defined", "ntp-synced",
	}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("network = %v, want %v", got, want)
	}
	if ops, ok := r["operators"]; !ok || len(ops) != 0 {
		t.Errorf("operators = %v, %v", ops, ok)
	}
	for _, c := range r.Categories() {
		if !sort.SliceIsSorted(r[c], func(i, j int) bool { return r[c][i].ID < r[c][j].ID }) {
			t.Errorf("%s not sorted", c)
		}
	}
	expect(t, r, IDCompatibleWithClusterPlatform, "success", "Host is compatible with cluster platform baremetal")
	expect(t, r, IDHostMachineCIDRDefined, "success", "Machine Network CIDR is defined")
	expect(t, r, IDBelongsToMachineCIDR, "success", "Host belongs to all machine network CIDRs")
	expect(t, r, IDAPIDomainResolved, "success", "Domain name resolution for the api.c1.example.com domain was successful or not required")
}

func TestHostUnbound(t *testing.T) {
	in := boundInput(4, 16, "auto-assign")
	in.Bound, in.MachineNetworks, in.NTPSources = false, nil, nil
	r := Host(in)
	if _, ok := r["operators"]; ok {
		t.Error("unbound host has an operators category")
	}
	if got, want := ids(r, "network"), []string{"connected"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("network = %v, want %v", got, want)
	}
	if got, want := ids(r, "hardware"), []string{
		"has-cpu-cores-for-role", "has-inventory", "has-memory-for-role", "has-min-cpu-cores", "has-min-memory",
		"has-min-valid-disks", "hostname-valid", "sufficient-installation-disk-speed",
	}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("hardware = %v, want %v", got, want)
	}
	in.NTPSources = []assistedapi.NTPSource{{SourceName: "a", SourceState: assistedapi.NTPSourceSynced}}
	expect(t, Host(in), IDNTPSynced, "success", "Host NTP is synced")
}

func TestHostNTP(t *testing.T) {
	in := boundInput(4, 16, "master")
	in.NTPSources = nil
	expect(t, Host(in), IDNTPSynced, "failure", "Host couldn't synchronize with any NTP server")
	in.NTPSources = []assistedapi.NTPSource{{SourceName: "a", SourceState: assistedapi.NTPSourceUnreachable}}
	expect(t, Host(in), IDNTPSynced, "failure", "Host couldn't synchronize with any NTP server")
}

func TestHostDiskAndConnection(t *testing.T) {
	in := boundInput(4, 16, "master")
	expect(t, Host(in), IDSufficientInstallDiskSpeed, "success", "Speed of installation disk has not yet been measured")
	fast, slow := int64(3), int64(25)
	in.DiskSpeedMs = &fast
	expect(t, Host(in), IDSufficientInstallDiskSpeed, "success", "Speed of installation disk is sufficient")
	in.DiskSpeedMs = &slow
	expect(t, Host(in), IDSufficientInstallDiskSpeed, "failure", "While preparing the previous installation the installation disk speed measurement failed or was found to be insufficient")
	in.InstallationDisk = ""
	expect(t, Host(in), IDHasMinValidDisks, "failure", "No eligible disks were found, please check specific disks to see why they are not eligible")
	in.Connected = false
	expect(t, Host(in), IDConnected, "failure", "Host is disconnected")
}

func TestHostMachineNetwork(t *testing.T) {
	in := boundInput(4, 16, "master")
	in.MachineNetworks = []string{"10.0.0.0/16"}
	expect(t, Host(in), IDBelongsToMachineCIDR, "failure", "Host does not belong to machine network CIDRs. Verify that the host belongs to every CIDR listed under machine networks")
	in.MachineNetworks = nil
	expect(t, Host(in), IDHostMachineCIDRDefined, "failure", "Machine Network CIDR is undefined; the Machine Network CIDR can be defined by setting either the API or Ingress virtual IPs")
	in.UserManagedNetworking = true
	expect(t, Host(in), IDHostMachineCIDRDefined, "success", "No Machine Network CIDR needed: User Managed Networking")
	expect(t, Host(in), IDBelongsToMachineCIDR, "success", "No machine network CIDR validation needed: User Managed Networking")
	expect(t, Host(in), IDCompatibleWithClusterPlatform, "success", "Host is compatible with cluster platform none")
	in.SNO = true
	expect(t, Host(in), IDBelongsToMachineCIDR, "pending", "Missing inventory or machine network CIDR")
	in.MachineNetworks = []string{SNOMachineNetwork(in.Inventory)}
	expect(t, Host(in), IDBelongsToMachineCIDR, "success", "Host belongs to all machine network CIDRs")
}

func TestHostDNSWithUserManagedNetworking(t *testing.T) {
	in := boundInput(4, 16, "master")
	in.UserManagedNetworking = true
	expect(t, Host(in), IDAPIDomainResolved, "pending", "DNS validation for the api.c1.example.com domain cannot be completed at the moment. This could be due to other validations")
	d := DNSDomains("c1", "example.com")
	in.DomainsResolved = map[string]bool{d[IDAPIDomainResolved]: true, d[IDAPIIntDomainResolved]: true, d[IDAppsDomainResolved]: false}
	r := Host(in)
	expect(t, r, IDAPIDomainResolved, "success", "Domain name resolution for the api.c1.example.com domain was successful or not required")
	expect(t, r, IDAppsDomainResolved, "failure", "Couldn't resolve domain name *.apps.c1.example.com on the host. To continue installation, create the necessary DNS entries to resolve this domain name to your cluster's application ingress IP address")
	if d[IDAppsDomainResolved] != "console-openshift-console.apps.c1.example.com" {
		t.Errorf("apps probe = %s", d[IDAppsDomainResolved])
	}
	in.SNO = true
	expect(t, Host(in), IDAppsDomainResolved, "success", "Domain name resolution for the *.apps.c1.example.com domain was successful or not required")
}

func TestSNOMachineNetwork(t *testing.T) {
	inv := inventory(4, 16, "192.168.111.20/24")
	inv.Interfaces = append([]assistedapi.Interface{{Name: "eth9", IPV4Addresses: []string{"10.9.0.5/16"}}}, inv.Interfaces...)
	if got := SNOMachineNetwork(inv); got != "192.168.111.0/24" {
		t.Errorf("default-route network = %s", got)
	}
	inv.Routes = nil
	if got := SNOMachineNetwork(inv); got != "10.9.0.0/16" {
		t.Errorf("first network = %s", got)
	}
	if SNOMachineNetwork(nil) != "" {
		t.Error("nil inventory")
	}
}

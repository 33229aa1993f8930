package installer

import (
	"bytes"
	"context"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/fault"
)

const (
	canaryTSIG = "Y2FuYXJ5LXRzaWctc2VjcmV0LTM="
)

// TestEquinixManifests: create manifests on Equinix Metal reserves the
// cluster's two elastic IPs with the tags the provider adopts them by,
// writes them into the install-config, and writes the EquinixMetalCluster
// (its endpoint the API address), the machine templates and the Secrets
// of the API key and the TSIG key. A second run reserves nothing more.
// Neither key is in what reaches the installed cluster or a machine: the
// manifests, the bootstrap Ignition, the sanitized install-config.
func TestEquinixManifests(t *testing.T) {
	g := NewWithT(t)
	s := simequinix.New(simequinix.Options{})
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)
	token := s.NewToken()
	p, err := s.CreateProject(token, "install")
	g.Expect(err).NotTo(HaveOccurred())
	t.Setenv(EquinixAPIKeyEnv, token)

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "tsig.key")
	g.Expect(os.WriteFile(keyFile, []byte("key \"metalshift.\" {\n\talgorithm hmac-sha256;\n\tsecret \""+canaryTSIG+"\";\n};\n"), 0o600)).To(Succeed())
	ic := `apiVersion: v1
baseDomain: lab.example.com
metadata: {name: eqx}
controlPlane: {name: master, replicas: 3}
compute: [{name: worker, replicas: 2}]
platform:
  equinixMetal:
    projectID: ` + p.ID + `
    metro: sv
    apiURL: ` + api.URL + `/metal/v1
    defaultMachinePlatform: {plan: c3.small.x86, tags: [team=platform]}
    dns: {server: 127.0.0.1:5353, zone: example.com, tsigKeyFile: ` + keyFile + `}
pullSecret: '{"auths":{}}'
metalshift:
  osImage: {url: http://images/rhcos.raw, checksum: abc}
`
	g.Expect(os.WriteFile(filepath.Join(dir, InstallConfigFile), []byte(ic), 0o600)).To(Succeed())
	var out bytes.Buffer
	g.Expect(CreateManifests(context.Background(), dir, &out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("Reserved the API address"))

	written, _, err := LoadInstallConfig(dir)
	g.Expect(err).NotTo(HaveOccurred())
	em := written.Platform.EquinixMetal
	g.Expect(em.APIVIP).NotTo(BeEmpty())
	g.Expect(em.IngressVIP).NotTo(BeEmpty())
	l := s.Ledger()
	g.Expect(l.IPReservations).To(HaveLen(2))
	for _, r := range l.IPReservations {
		g.Expect(r.Tags).To(ContainElement("metalshift.io/cluster=eqx/eqx"))
		g.Expect(r.Block).To(Or(HavePrefix(em.APIVIP+"/"), HavePrefix(em.IngressVIP+"/")))
	}

	// Again (a new install dir from the same install-config, before the
	// addresses were written): the same reservations.
	dir2 := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir2, InstallConfigFile), []byte(ic), 0o600)).To(Succeed())
	g.Expect(CreateManifests(context.Background(), dir2, &out)).To(Succeed())
	again, _, err := LoadInstallConfig(dir2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Platform.EquinixMetal.APIVIP).To(Equal(em.APIVIP))
	g.Expect(s.Ledger().IPReservations).To(HaveLen(2))

	// The hub objects.
	files := map[string]map[string]any{}
	g.Expect(filepath.WalkDir(filepath.Join(dir, ClusterAPIDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		var o map[string]any
		g.Expect(yaml.Unmarshal(data, &o)).To(Succeed())
		files[o["kind"].(string)+"/"+o["metadata"].(map[string]any)["name"].(string)] = o
		return nil
	})).To(Succeed())
	g.Expect(files).To(HaveKey("EquinixMetalCluster/eqx"))
	g.Expect(files).To(HaveKey("EquinixMetalMachineTemplate/eqx-master"))
	g.Expect(files).To(HaveKey("EquinixMetalMachineTemplate/eqx-worker"))
	g.Expect(files).NotTo(HaveKey("MetalCluster/eqx"))
	emc := files["EquinixMetalCluster/eqx"]["spec"].(map[string]any)
	g.Expect(emc["controlPlaneEndpoint"]).To(Equal(map[string]any{"host": em.APIVIP, "port": float64(6443)}))
	g.Expect(emc["dns"]).To(HaveKeyWithValue("baseDomain", "lab.example.com"))
	g.Expect(files["Secret/eqx-equinix-credentials"]["stringData"]).To(HaveKeyWithValue(infrav1.EquinixMetalAPIKeyKey, token))
	g.Expect(files["Secret/eqx-tsig"]["stringData"]).To(Equal(map[string]any{"name": "metalshift.", "algorithm": "hmac-sha256", "secret": canaryTSIG}))
	cluster := files["Cluster/eqx"]["spec"].(map[string]any)
	g.Expect(cluster["infrastructureRef"]).To(HaveKeyWithValue("kind", "EquinixMetalCluster"))

	// Nothing the cluster or a machine gets holds a key.
	secrets := []string{token, canaryTSIG}
	for _, sub := range []string{ManifestsDir, OpenShiftDir} {
		g.Expect(filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			g.Expect(err).NotTo(HaveOccurred())
			for _, sec := range secrets {
				g.Expect(string(data)).NotTo(ContainSubstring(sec), p)
			}
			return nil
		})).To(Succeed())
	}
	bootstrap, _, _ := bootstrapIgnition(g, dir)
	raw, err := os.ReadFile(filepath.Join(dir, InstallConfigFile))
	g.Expect(err).NotTo(HaveOccurred())
	sanitized, err := installconfig.Sanitize(raw)
	g.Expect(err).NotTo(HaveOccurred())
	for _, sec := range secrets {
		g.Expect(string(bootstrap)).NotTo(ContainSubstring(sec))
		g.Expect(string(sanitized)).NotTo(ContainSubstring(sec))
	}
	g.Expect(strings.Contains(string(sanitized), keyFile)).To(BeFalse())

	// Without a key, a clear error.
	t.Setenv(EquinixAPIKeyEnv, "")
	dir3 := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir3, InstallConfigFile), []byte(ic), 0o600)).To(Succeed())
	g.Expect(CreateManifests(context.Background(), dir3, &out)).To(MatchError(ContainSubstring("no Equinix Metal API key: set $METAL_AUTH_TOKEN or platform.equinixMetal.apiKeyFile")))
}

// TestDestroyEquinix: what is still tagged with the cluster in the project
// (a device, an address the hub never recorded) is deleted and said so;
// what is not the cluster's stays. A third of the API's answers are 503:
// each call is made again until it is answered.
func TestDestroyEquinix(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := simequinix.New(simequinix.Options{Timings: simequinix.Timings{Queued: 50 * time.Millisecond, Provisioning: 50 * time.Millisecond,
		Deprovisioning: 100 * time.Millisecond, Power: 50 * time.Millisecond}, Faults: fault.MustParse("seed=5,equinix.5xx=33%:503")})
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)
	token := s.NewToken()
	p, err := s.CreateProject(token, "install")
	g.Expect(err).NotTo(HaveOccurred())
	t.Setenv(EquinixAPIKeyEnv, token)
	ic := &installconfig.InstallConfig{Metadata: installconfig.Metadata{Name: "eqx"}, Platform: installconfig.Platform{EquinixMetal: &installconfig.EquinixMetal{
		ProjectID: p.ID, Metro: "sv", APIURL: api.URL + "/metal/v1"}}}
	c, err := EquinixClient(ic)
	g.Expect(err).NotTo(HaveOccurred())
	device := func(host string, tags ...string) {
		g.Expect(retried(ctx, func() error {
			_, err := c.CreateDevice(ctx, p.ID, equinixapi.DeviceCreateInput{Metro: "sv", Plan: "c3.small.x86", OperatingSystem: "custom_ipxe",
				Hostname: host, IPXEScriptURL: "http://boot.example/x.ipxe", Tags: tags})
			return err
		})).To(Succeed())
	}
	device("eqx-master-0", "metalshift.io/cluster=eqx/eqx")
	device("someone-else", "metalshift.io/cluster=other/other")
	g.Expect(retried(ctx, func() error {
		_, err := c.RequestIPReservation(ctx, p.ID, equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "sv",
			Tags: []string{"metalshift.io/cluster=eqx/eqx", "metalshift.io/role=api"}})
		return err
	})).To(Succeed())

	var out bytes.Buffer
	g.Expect(DestroyEquinix(ctx, ic, &out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("(eqx-master-0), which the hub did not"))
	g.Expect(out.String()).To(ContainSubstring("Nothing tagged metalshift.io/cluster=eqx/eqx is left"))
	l := s.Ledger()
	g.Expect(l.IPReservations).To(BeEmpty())
	g.Expect(l.Devices).To(HaveLen(1))
	g.Expect(l.Devices[0].Hostname).To(Equal("someone-else"))
}

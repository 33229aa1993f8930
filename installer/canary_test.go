package installer

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4"
	. "github.com/onsi/gomega"
	"github.com/vincent-petithory/dataurl"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/internal/ignition"
)

// Secrets of the install-config that must not leave the hub, except the
// pull secret as the bootstrap node's own file.
const (
	canaryPullSecret = "canary-pull-secret-0"
	canaryBMC1       = "canary-bmc-password-1"
	canaryBMC2       = "canary-bmc-password-2"
	canaryBMCUser    = "canary-bmc-username"
)

// canaryInstallConfig has the canaries in block, flow and quoted styles.
const canaryInstallConfig = `apiVersion: v1
baseDomain: example.com
metadata:
  name: canary
controlPlane:
  name: master
  replicas: 1
compute:
- name: worker
  replicas: 0
pullSecret: |
  {"auths":{"quay.io":{"auth":"` + canaryPullSecret + `"}}}
platform:
  baremetal:
    apiVIPs: [192.0.2.10]
    hosts:
    - name: h0
      role: master
      bootMACAddress: 52-54-00-00-00-01
      bmc:
        address: redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1
        username: ` + canaryBMCUser + `
        password: >-
          ` + canaryBMC1 + `
    - name: h1
      bootMACAddress: 52:54:00:00:00:02
      bmc: {address: "ipmi://10.0.0.2", username: admin, password: "` + canaryBMC2 + `"}
metalshift:
  osImage:
    url: http://images/rhcos.raw
    checksum: abc
`

var canaries = []string{canaryPullSecret, canaryBMC1, canaryBMC2, canaryBMCUser}

// TestNoSecretLeavesTheHub renders an install dir whose install-config
// holds canary secrets and looks for them in everything that leaves the
// hub: the manifests and openshift directories (the installed cluster's
// objects) and the bootstrap node's Ignition, rendered from them as the
// bootstrap provider does. Only the pull secret may be there, and only as
// the bootstrap node's pull-secret file.
func TestNoSecretLeavesTheHub(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, InstallConfigFile), []byte(canaryInstallConfig), 0o600)).To(Succeed())
	g.Expect(CreateManifests(context.Background(), dir, io.Discard)).To(Succeed())

	// The installed cluster's manifests.
	for _, sub := range []string{ManifestsDir, OpenShiftDir} {
		files := 0
		g.Expect(filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			data, err := os.ReadFile(p)
			g.Expect(err).NotTo(HaveOccurred())
			expectNoCanary(g, p, data)
			return nil
		})).To(Succeed())
		g.Expect(files).NotTo(BeZero(), sub)
	}
	config, err := os.ReadFile(filepath.Join(dir, ManifestsDir, "cluster-config.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(config)).To(ContainSubstring("redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1"), "the hosts stay, without credentials")

	// The bootstrap node's Ignition, from the hub objects the installer applies.
	bootstrap, _, opts := bootstrapIgnition(g, dir)
	cfg, _, err := v3_4.Parse(bootstrap)
	g.Expect(err).NotTo(HaveOccurred())
	expectNoCanary(g, "the bootstrap Ignition", bootstrap)
	seen := map[string]bool{}
	for _, f := range cfg.Storage.Files {
		d, err := dataurl.DecodeString(*f.Contents.Source)
		g.Expect(err).NotTo(HaveOccurred(), f.Path)
		seen[f.Path] = true
		if f.Path == bootstrapnode.PullSecretPath {
			g.Expect(string(d.Data)).To(ContainSubstring(canaryPullSecret), "the bootstrap node pulls with it")
			g.Expect(*f.Mode).To(Equal(0o600))
			expectNoCanary(g, f.Path, []byte(strings.ReplaceAll(string(d.Data), canaryPullSecret, "")))
			continue
		}
		expectNoCanary(g, f.Path, d.Data)
	}
	g.Expect(seen).To(HaveKey(bootstrapnode.InstallConfigPath))
	g.Expect(seen).To(HaveKey(bootstrapnode.ManifestsDir + "/cluster-config.yaml"))

	// The renderer refuses an install-config that was not sanitized.
	raw, err := os.ReadFile(filepath.Join(dir, InstallConfigFile))
	g.Expect(err).NotTo(HaveOccurred())
	opts.InstallConfig = raw
	_, err = ignition.Bootstrap(opts)
	g.Expect(err).To(MatchError(ContainSubstring("installconfig.Sanitize")))
	expectNoCanary(g, "the error", []byte(err.Error()))
}

func expectNoCanary(g Gomega, where string, data []byte) {
	for _, c := range canaries {
		g.ExpectWithOffset(1, string(data)).NotTo(ContainSubstring(c), fmt.Sprintf("%s holds %s", where, c))
	}
}

// bootstrapIgnition renders the bootstrap node's Ignition of the install
// dir as the bootstrap provider does, from the sanitized install-config,
// the wrapped manifests and the install's CA and kubeconfig.
func bootstrapIgnition(g Gomega, dir string) ([]byte, *installconfig.InstallConfig, ignition.BootstrapOptions) {
	raw, err := os.ReadFile(filepath.Join(dir, InstallConfigFile))
	g.Expect(err).NotTo(HaveOccurred())
	ic, err := installconfig.Parse(raw)
	g.Expect(err).NotTo(HaveOccurred())
	sanitized, err := installconfig.Sanitize(raw)
	g.Expect(err).NotTo(HaveOccurred())
	wrapped, err := WrapManifests(dir, ic.Metadata.Name)
	g.Expect(err).NotTo(HaveOccurred())
	var manifests []ignition.Manifest
	for _, s := range wrapped {
		d := "manifests"
		if s.Annotations[controlplanev1.ManifestAnnotation] == controlplanev1.ManifestTypeOpenShift {
			d = "openshift"
		}
		for k, v := range s.Data {
			manifests = append(manifests, ignition.Manifest{Dir: d, Name: k, Data: v})
		}
	}
	ca, err := os.ReadFile(filepath.Join(dir, StateDir, "root-ca.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	key, err := os.ReadFile(filepath.Join(dir, StateDir, "root-ca.key"))
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := os.ReadFile(filepath.Join(dir, AuthDir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	opts := ignition.BootstrapOptions{InstallConfig: sanitized, PullSecret: []byte(ic.PullSecret), Manifests: manifests,
		RootCACert: ca, RootCAKey: key, AdminKubeconfig: kubeconfig, ReleaseVersion: ic.Version()}
	bootstrap, err := ignition.Bootstrap(opts)
	g.Expect(err).NotTo(HaveOccurred())
	return bootstrap, ic, opts
}

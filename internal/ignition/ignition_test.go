package ignition

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

func TestPointerGolden(t *testing.T) {
	for _, role := range []string{"master", "worker"} {
		t.Run(role, func(t *testing.T) {
			got, err := Pointer(PointerOptions{MachineConfigServer: "https://api-int.demo.example.com:22623", Role: role, RootCA: []byte(testCA)})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			golden(t, role+".ign", got)
		})
	}
}

func TestPointerOverride(t *testing.T) {
	g := NewWithT(t)
	override := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hello"}}]}}`
	got, err := Pointer(PointerOptions{MachineConfigServer: "https://10.0.0.5:22623", Role: "worker", RootCA: []byte(testCA), Override: []byte(override)})
	g.Expect(err).NotTo(HaveOccurred())
	var cfg struct {
		Ignition struct {
			Config struct {
				Merge []struct{ Source string }
			}
		}
	}
	g.Expect(json.Unmarshal(got, &cfg)).To(Succeed())
	g.Expect(cfg.Ignition.Config.Merge).To(HaveLen(2))
	g.Expect(cfg.Ignition.Config.Merge[0].Source).To(Equal("https://10.0.0.5:22623/config/worker"))
	enc := strings.TrimPrefix(cfg.Ignition.Config.Merge[1].Source, "data:text/plain;charset=utf-8;base64,")
	dec, err := base64.StdEncoding.DecodeString(enc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(dec)).To(Equal(override), "the override is merged last, as given")
}

func TestPointerErrors(t *testing.T) {
	tests := []struct {
		name string
		o    PointerOptions
		want string
	}{
		{"bootstrap is not a pointer", PointerOptions{MachineConfigServer: "https://h:22623", Role: "bootstrap", RootCA: []byte(testCA)}, "not \"bootstrap\""},
		{"no CA", PointerOptions{MachineConfigServer: "https://h:22623", Role: "master"}, "root CA is empty"},
		{"plain http", PointerOptions{MachineConfigServer: "http://h:22623", Role: "master", RootCA: []byte(testCA)}, "want https"},
		{"override not JSON", PointerOptions{MachineConfigServer: "https://h:22623", Role: "master", RootCA: []byte(testCA), Override: []byte("{")}, "invalid ignition override"},
		{"override version 2", PointerOptions{MachineConfigServer: "https://h:22623", Role: "master", RootCA: []byte(testCA), Override: []byte(`{"ignition":{"version":"2.2.0"}}`)}, "invalid ignition override"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Pointer(tt.o)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
	_, err := Pointer(PointerOptions{MachineConfigServer: "https://h:22623", Role: "master", RootCA: []byte(testCA), Override: []byte("{")})
	g := NewWithT(t)
	g.Expect(errors.Is(err, ErrInvalidOverride)).To(BeTrue())
}

// golden compares got with testdata/<name>; UPDATE_GOLDEN=1 rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	g := NewWithT(t)
	p := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		g.Expect(os.WriteFile(p, got, 0o600)).To(Succeed())
	}
	want, err := os.ReadFile(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(string(want)))
}

func TestBootstrapGolden(t *testing.T) {
	got, err := Bootstrap(BootstrapOptions{
		InstallConfig: []byte("apiVersion: v1\nmetadata:\n  name: demo\n"),
		Manifests: []Manifest{
			{Dir: "openshift", Name: "99-motd.yaml", Data: []byte("kind: ConfigMap\n")},
			{Dir: "manifests", Name: "cluster-config.yaml", Data: []byte("kind: ConfigMap\n")},
		},
		RootCACert: []byte(testCA), RootCAKey: []byte("-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----\n"),
		AdminKubeconfig: []byte("apiVersion: v1\nkind: Config\n"), ReleaseVersion: "4.20.0",
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	golden(t, "bootstrap.ign", got)
}

func TestRemote(t *testing.T) {
	g := NewWithT(t)
	full := []byte(`{"ignition":{"version":"3.4.0"}}`)
	got, err := Remote(RemoteOptions{URL: "https://192.0.2.1:6181/ignition/v1/ns/cfg", Token: "t0ken", CA: []byte(testCA), Full: full})
	g.Expect(err).NotTo(HaveOccurred())
	golden(t, "remote.ign", got)
	// The pinned hash is the served config's.
	sum := sha512.Sum512(full)
	g.Expect(string(got)).To(ContainSubstring("sha512-" + hex.EncodeToString(sum[:])))

	for _, o := range []RemoteOptions{
		{URL: "ftp://x/y", Token: "t", Full: full},
		{URL: "https://x/y", Full: full},
	} {
		_, err := Remote(o)
		g.Expect(err).To(HaveOccurred(), "%+v", o)
	}
}

// TestValidateSaysWhatIsWrong: a person fixing an override reads where the
// config is wrong, not only that it is.
func TestValidateSaysWhatIsWrong(t *testing.T) {
	err := Validate([]byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"relative/path"}]}}`))
	if err == nil || !strings.Contains(err.Error(), "path not absolute") {
		t.Fatalf("want an error naming the relative path, got %v", err)
	}
}

package ignition

import (
	"encoding/base64"
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
			g := NewWithT(t)
			got, err := Pointer(PointerOptions{MachineConfigServer: "https://api-int.demo.example.com:22623", Role: role, RootCA: []byte(testCA)})
			g.Expect(err).NotTo(HaveOccurred())
			golden := filepath.Join("testdata", role+".ign")
			if os.Getenv("UPDATE_GOLDEN") != "" {
				g.Expect(os.WriteFile(golden, got, 0o600)).To(Succeed())
			}
			want, err := os.ReadFile(golden)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(got)).To(Equal(string(want)))
			g.Expect(Validate(got)).To(Succeed())
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

func FuzzValidateOverride(f *testing.F) {
	f.Add([]byte(`{"ignition":{"version":"3.4.0"}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) { _ = validateOverride(b) })
}

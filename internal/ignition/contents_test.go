package ignition

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
)

// rendered is the part of an Ignition config that machines act on, decoded
// with encoding/json rather than Ignition's parser, which the renderer
// already ran.
type rendered struct {
	Ignition struct {
		Version string
		Config  struct {
			Merge []resource
		}
		Security struct {
			TLS struct {
				CertificateAuthorities []resource
			}
		}
	}
	Storage struct {
		Files []struct {
			Path      string
			Mode      *int
			Overwrite *bool
			Contents  resource
		}
	}
	Systemd struct {
		Units []struct {
			Name     string
			Enabled  *bool
			Contents *string
		}
	}
}

type resource struct {
	Source       *string
	HTTPHeaders  []struct{ Name, Value string }
	Verification struct{ Hash *string }
}

// wantFile is one rendered file as the machine writes it.
type wantFile struct {
	mode      int
	overwrite bool
	data      string
}

func decode(t *testing.T, raw []byte) rendered {
	t.Helper()
	var r rendered
	NewWithT(t).Expect(json.Unmarshal(raw, &r)).To(Succeed())
	return r
}

// dataURLContent decodes a data URL as the renderer writes them.
func dataURLContent(g Gomega, src *string) string {
	g.Expect(src).NotTo(BeNil())
	enc, ok := strings.CutPrefix(*src, "data:text/plain;charset=utf-8;base64,")
	g.Expect(ok).To(BeTrue(), "a base64 data URL: %.60s", *src)
	b, err := base64.StdEncoding.DecodeString(enc)
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func files(g Gomega, r rendered) map[string]wantFile {
	out := map[string]wantFile{}
	for _, f := range r.Storage.Files {
		g.Expect(out).NotTo(HaveKey(f.Path), "one file per path")
		g.Expect(f.Mode).NotTo(BeNil(), f.Path)
		g.Expect(f.Overwrite).NotTo(BeNil(), f.Path)
		out[f.Path] = wantFile{mode: *f.Mode, overwrite: *f.Overwrite, data: dataURLContent(g, f.Contents.Source)}
	}
	return out
}

var bootstrapInput = BootstrapOptions{
	InstallConfig: []byte("apiVersion: v1\nmetadata:\n  name: demo\n"),
	Manifests: []Manifest{
		{Dir: "openshift", Name: "99-motd.yaml", Data: []byte("kind: ConfigMap\nmetadata:\n  name: motd\n")},
		{Dir: "manifests", Name: "cluster-config.yaml", Data: []byte("kind: ConfigMap\nmetadata:\n  name: cluster-config\n")},
	},
	RootCACert: []byte(testCA), RootCAKey: []byte("-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----\n"),
	AdminKubeconfig: []byte("apiVersion: v1\nkind: Config\n"), ReleaseVersion: "4.20.0",
}

// TestBootstrapContents: the bootstrap node gets every input at the path the
// bootstrap service reads, byte for byte, secrets readable by root only, and
// the bootstrap service enabled.
func TestBootstrapContents(t *testing.T) {
	g := NewWithT(t)
	raw, err := Bootstrap(bootstrapInput)
	g.Expect(err).NotTo(HaveOccurred())
	r := decode(t, raw)
	g.Expect(r.Ignition.Version).To(Equal("3.4.0"))
	g.Expect(r.Ignition.Config.Merge).To(BeEmpty(), "no override, nothing merged")

	fs := files(g, r)
	want := map[string]wantFile{
		"/opt/openshift/install-config.yaml":           {0o600, true, "apiVersion: v1\nmetadata:\n  name: demo\n"},
		"/opt/openshift/tls/root-ca.crt":               {0o644, true, testCA},
		"/opt/openshift/tls/root-ca.key":               {0o600, true, string(bootstrapInput.RootCAKey)},
		"/opt/openshift/auth/kubeconfig":               {0o600, true, "apiVersion: v1\nkind: Config\n"},
		"/opt/openshift/release-version":               {0o644, true, "4.20.0"},
		"/opt/openshift/manifests/cluster-config.yaml": {0o644, true, "kind: ConfigMap\nmetadata:\n  name: cluster-config\n"},
		"/opt/openshift/openshift/99-motd.yaml":        {0o644, true, "kind: ConfigMap\nmetadata:\n  name: motd\n"},
	}
	g.Expect(fs).To(Equal(want))

	g.Expect(r.Systemd.Units).To(HaveLen(1))
	u := r.Systemd.Units[0]
	g.Expect(u.Name).To(Equal("bootkube.service"))
	g.Expect(u.Enabled).To(HaveValue(BeTrue()))
	g.Expect(u.Contents).NotTo(BeNil())
	g.Expect(*u.Contents).To(ContainSubstring("\nWorkingDirectory=/opt/openshift\n"))
	g.Expect(*u.Contents).To(ContainSubstring("\nExecStart=/usr/local/bin/bootkube.sh\n"))
	g.Expect(*u.Contents).To(ContainSubstring("\nWantedBy=multi-user.target\n"))
}

// TestBootstrapOverride: a user's override is merged as given.
func TestBootstrapOverride(t *testing.T) {
	g := NewWithT(t)
	o := bootstrapInput
	o.Override = []byte(`{"ignition":{"version":"3.1.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}}`)
	raw, err := Bootstrap(o)
	g.Expect(err).NotTo(HaveOccurred())
	r := decode(t, raw)
	g.Expect(r.Ignition.Config.Merge).To(HaveLen(1))
	g.Expect(dataURLContent(g, r.Ignition.Config.Merge[0].Source)).To(Equal(string(o.Override)))
	g.Expect(files(g, r)).To(HaveKey(bootstrapnode.InstallConfigPath), "the rendered files stay")
}

// TestBootstrapErrors: what is wrong with the inputs, named.
func TestBootstrapErrors(t *testing.T) {
	manifest := func(dir, name string) BootstrapOptions {
		o := bootstrapInput
		o.Manifests = []Manifest{{Dir: dir, Name: name, Data: []byte("kind: ConfigMap\n")}}
		return o
	}
	without := func(change func(*BootstrapOptions)) BootstrapOptions {
		o := bootstrapInput
		change(&o)
		return o
	}
	tests := []struct {
		name string
		o    BootstrapOptions
		want string
	}{
		{"no install-config", without(func(o *BootstrapOptions) { o.InstallConfig = nil }), "the install-config is empty"},
		{"no CA key", without(func(o *BootstrapOptions) { o.RootCAKey = nil }), "the root CA certificate or key is empty"},
		{"no CA certificate", without(func(o *BootstrapOptions) { o.RootCACert = nil }), "the root CA certificate or key is empty"},
		{"no kubeconfig", without(func(o *BootstrapOptions) { o.AdminKubeconfig = nil }), "the admin kubeconfig is empty"},
		{"unknown directory", manifest("tls", "a.yaml"), `manifest a.yaml: directory "tls" is neither manifests nor openshift`},
		{"path in the name", manifest("manifests", "../../etc/passwd"), `manifest name "../../etc/passwd" must be a plain file name`},
		{"dot-dot", manifest("openshift", ".."), `manifest name ".." must be a plain file name`},
		{"empty name", manifest("openshift", ""), `manifest name "" must be a plain file name`},
		{"duplicate", without(func(o *BootstrapOptions) {
			o.Manifests = []Manifest{{Dir: "manifests", Name: "a.yaml"}, {Dir: "manifests", Name: "a.yaml"}}
		}), "two manifests are named /opt/openshift/manifests/a.yaml"},
		{"bad override", without(func(o *BootstrapOptions) { o.Override = []byte(`{"ignition":{"version":"2.2.0"}}`) }), "invalid ignition override"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Bootstrap(tt.o)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// TestPointerContents: a master or worker merges its role's config from
// the machine-config-server and trusts exactly the given CA for it.
func TestPointerContents(t *testing.T) {
	for _, role := range []string{"master", "worker"} {
		t.Run(role, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := Pointer(PointerOptions{MachineConfigServer: "https://api-int.demo.example.com:22623", Role: role, RootCA: []byte(testCA)})
			g.Expect(err).NotTo(HaveOccurred())
			r := decode(t, raw)
			g.Expect(r.Ignition.Version).To(Equal("3.4.0"))
			g.Expect(r.Ignition.Config.Merge).To(HaveLen(1))
			g.Expect(r.Ignition.Config.Merge[0].Source).To(HaveValue(Equal("https://api-int.demo.example.com:22623/config/" + role)))
			g.Expect(r.Ignition.Security.TLS.CertificateAuthorities).To(HaveLen(1))
			g.Expect(dataURLContent(g, r.Ignition.Security.TLS.CertificateAuthorities[0].Source)).To(Equal(testCA))
			g.Expect(r.Storage.Files).To(BeEmpty(), "the machine-config-server provides the rest")
			g.Expect(r.Systemd.Units).To(BeEmpty())
		})
	}
}

// TestRemoteContents: a config too large for user data is merged from the
// ignition server with the bearer token, pinned by its SHA-512, over TLS
// trusting the given CA.
func TestRemoteContents(t *testing.T) {
	g := NewWithT(t)
	full := []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/big"}]}}`)
	raw, err := Remote(RemoteOptions{URL: "https://192.0.2.1:6181/ignition/v1/ns/cfg", Token: "t0ken", CA: []byte(testCA), Full: full})
	g.Expect(err).NotTo(HaveOccurred())
	r := decode(t, raw)
	g.Expect(r.Ignition.Config.Merge).To(HaveLen(1))
	m := r.Ignition.Config.Merge[0]
	g.Expect(m.Source).To(HaveValue(Equal("https://192.0.2.1:6181/ignition/v1/ns/cfg")))
	g.Expect(m.HTTPHeaders).To(ConsistOf(struct{ Name, Value string }{"Authorization", "Bearer t0ken"}))
	sum := sha512.Sum512(full)
	g.Expect(m.Verification.Hash).To(HaveValue(Equal("sha512-" + hex.EncodeToString(sum[:]))))
	g.Expect(r.Ignition.Security.TLS.CertificateAuthorities).To(HaveLen(1))
	g.Expect(dataURLContent(g, r.Ignition.Security.TLS.CertificateAuthorities[0].Source)).To(Equal(testCA))

	// Plain http (the hub's ignition server without TLS) trusts no CA.
	raw, err = Remote(RemoteOptions{URL: "http://192.0.2.1:6181/ignition/v1/ns/cfg", Token: "t0ken", Full: full})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decode(t, raw).Ignition.Security.TLS.CertificateAuthorities).To(BeEmpty())
}

func TestRemoteErrors(t *testing.T) {
	tests := []struct {
		name string
		o    RemoteOptions
		want string
	}{
		{"ftp", RemoteOptions{URL: "ftp://x/y", Token: "t"}, `ignition server URL "ftp://x/y": want http(s)://host:port/path`},
		{"no host", RemoteOptions{URL: "https:///y", Token: "t"}, `ignition server URL "https:///y"`},
		{"no token", RemoteOptions{URL: "https://x/y"}, "a served config needs a token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Remote(tt.o)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// FuzzValidateOverride checks the promise of validateOverride: it accepts
// an Ignition config of spec 3.0 to 3.4 (as Ignition reads the version),
// which a pointer config then merges byte for byte; whatever it refuses is
// an ErrInvalidOverride that says why, and Pointer refuses it too.
// Seeds: testdata/fuzz/FuzzValidateOverride.
func FuzzValidateOverride(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		opts := PointerOptions{MachineConfigServer: "https://h:22623", Role: "worker", RootCA: []byte(testCA), Override: raw}
		err := validateOverride(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidOverride) {
				t.Fatalf("refused without ErrInvalidOverride: %v", err)
			}
			if reason := strings.TrimPrefix(err.Error(), ErrInvalidOverride.Error()+": "); strings.TrimSpace(reason) == "" || reason == err.Error() {
				t.Fatalf("refused without saying why: %q", err)
			}
			if _, perr := Pointer(opts); len(raw) > 0 && !errors.Is(perr, ErrInvalidOverride) {
				t.Fatalf("validateOverride refuses %q but Pointer says %v", raw, perr)
			}
			return
		}
		var stub struct {
			Ignition struct {
				Version string `json:"version"`
			} `json:"ignition"`
		}
		if err := json.Unmarshal(raw, &stub); err != nil {
			t.Fatalf("accepted %q, which is not a JSON config object: %v", raw, err)
		}
		if !specVersion3(stub.Ignition.Version) {
			t.Fatalf("accepted %q of version %q, not 3.0.0 to 3.4.0", raw, stub.Ignition.Version)
		}
		out, err := Pointer(opts)
		if err != nil {
			t.Fatalf("accepted %q, but a pointer config with it fails: %v", raw, err)
		}
		var r rendered
		if err := json.Unmarshal(out, &r); err != nil || len(r.Ignition.Config.Merge) != 2 || r.Ignition.Config.Merge[1].Source == nil {
			t.Fatalf("pointer config does not merge the override: %s", out)
		}
		enc, _ := strings.CutPrefix(*r.Ignition.Config.Merge[1].Source, "data:text/plain;charset=utf-8;base64,")
		if got, err := base64.StdEncoding.DecodeString(enc); err != nil || string(got) != string(raw) {
			t.Fatalf("the override merged is %q, not %q", got, raw)
		}
	})
}

// specVersion3 reports whether v reads, as Ignition parses versions
// (major.minor.patch, no pre-release or build metadata), as 3.0.0 to 3.4.0.
func specVersion3(v string) bool {
	if strings.ContainsAny(v, "+-") {
		return false
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	var n [3]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return false
		}
		n[i] = x
	}
	return n[0] == 3 && n[1] >= 0 && n[1] <= 4 && n[2] == 0
}

// TestValidate: the check every rendered config passes reads configs as
// Ignition 3.4 does: other spec versions, non-JSON and invalid configs are
// refused.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string // "" means valid
	}{
		{"3.4.0", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hi"}}]}}`, ""},
		{"older spec", `{"ignition":{"version":"3.2.0"}}`, "unsupported config version"},
		{"empty", ``, "not a config (empty)"},
		// Ignition's report (what is wrong, where) is not in these errors yet:
		// only that the config is not valid.
		{"not JSON", `{`, "not valid"},
		{"relative path", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"etc/motd"}]}}`, "not valid"},
		{"two files one path", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a"},{"path":"/a"}]}}`, "not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate([]byte(tt.raw))
			if tt.want == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

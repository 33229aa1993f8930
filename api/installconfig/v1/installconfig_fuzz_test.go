package installconfig

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// unknownField is how Parse names a field it does not know.
var unknownField = regexp.MustCompile(`unknown field "(?:[^"\\]|\\.)*"`)

// fuzzCanary stands for a secret: "$S" in a fuzzed document becomes it.
const fuzzCanary = "Zq7-c4nary-secret"

// installConfigSeeds are install-configs as users write them, with "$S"
// where a secret goes, and documents that stress the YAML reader.
var installConfigSeeds = []string{
	icHead + icHosts + "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"$S\"}}}'\n",
	icHead + "pullSecret: |\n  {\"auths\":{\"r\":{\"auth\":\"$S\"}}}\n" + `platform:
  baremetal:
    apiVIPs: [192.0.2.10]
    ingressVIPs: [192.0.2.11]
    hosts:
    - name: h0
      role: master
      bootMACAddress: 52:54:00:00:00:01
      bootMode: UEFISecureBoot
      rootDeviceHints: {deviceName: /dev/sda, minSizeGigabytes: 20}
      bmc: {address: "redfish://root:$S@10.0.0.1/redfish/v1/Systems/1", username: "$S", password: "$S"}
    - name: h1
      bootMACAddress: 52-54-00-00-00-02
      bmc: {address: "ipmi://$S@10.0.0.2:6230", username: admin, password: ">-\n $S"}
networking:
  machineNetwork: [{cidr: 192.0.2.0/24}]
  clusterNetwork: [{cidr: 10.128.0.0/14, hostPrefix: 23}]
  serviceNetwork: [172.30.0.0/16]
  networkType: OVNKubernetes
compute: [{name: worker, replicas: 1}]
fips: true
`,
	`{"apiVersion":"v1","baseDomain":"example.com","metadata":{"name":"demo"},"pullSecret":"$S",` +
		`"platform":{"baremetal":{"apiVIPs":["192.0.2.10"],"hosts":[{"name":"h0","bootMACAddress":"52:54:00:00:00:01",` +
		`"bmc":{"address":"redfish://u:$S@h/x?y#z","username":"$S","password":"$S"}}]}}}`,
	"pullSecret: $S\nPullSecret: other\nPULLSECRET: $S\n",
	"platform: {baremetal: {hosts: [{bmc: {address: \"$S@h\"}}, {bmc: {address: \"redfish://a@b:$S@h#x@y\"}}, {bmc: {address: \"//$S@h/p\"}}]}}\n",
	"platform: {baremetal: {hosts: [{bmc: {pasword: $S}}]}}\n",
	"pullSecret: &p $S\nsshKey: *p\n",
	"pullSecret: [\n",
	"pullSecret: !!int $S\n",
	"? [$S]\n: x\n",
	"pullSecret: *$S\n",
	"pullSecret: {auths: $S}\n",
	"controlPlane: {replicas: 99999999999}\n",
	"apiVersion: v1\nbaseDomain: $S\nmetadata: {name: $S}\npullSecret: $S\n",
	"",
}

// secretsOf are the values Sanitize must drop: the pull secret, every BMC
// username and password, and what a URL parser reads as the userinfo of a
// BMC address.
func secretsOf(ic *InstallConfig) []string {
	out := []string{ic.PullSecret}
	if bm := ic.Platform.BareMetal; bm != nil {
		for _, h := range bm.Hosts {
			out = append(out, h.BMC.Username, h.BMC.Password)
			if u, err := url.Parse(h.BMC.Address); err == nil && u.User != nil {
				pw, _ := u.User.Password()
				out = append(out, u.User.Username(), pw)
			}
			// What a person meant as userinfo, even where a URL parser
			// reads the address otherwise (a password with '/', '?' or '#').
			if _, rest, ok := strings.Cut(h.BMC.Address, "://"); ok {
				if at := strings.LastIndex(rest, "@"); at > 0 {
					user, pw, _ := strings.Cut(rest[:at], ":")
					out = append(out, user, pw)
				}
			}
		}
	}
	return out
}

// withoutSecrets is ic as Sanitize documents its copy.
func withoutSecrets(ic *InstallConfig) *InstallConfig {
	out := *ic
	out.PullSecret = ""
	if bm := ic.Platform.BareMetal; bm != nil {
		b := *bm
		b.Hosts = slices.Clone(bm.Hosts)
		for i := range b.Hosts {
			b.Hosts[i].BMC.Username, b.Hosts[i].BMC.Password = "", ""
			b.Hosts[i].BMC.Address = metal3v1.BMCAddressWithoutUserinfo(b.Hosts[i].BMC.Address)
		}
		out.Platform.BareMetal = &b
	}
	return &out
}

func icJSON(t *testing.T, ic *InstallConfig) string {
	t.Helper()
	data, err := json.Marshal(ic)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzSanitize checks the promise of Sanitize whatever the document: it
// refuses only what Parse refuses, and then shows no secret value (it
// names unknown fields, keys);
// otherwise its copy parses, holds no secret (HasSecrets, and no secret
// text unless a field that is kept holds it too), keeps every other field
// as it was, and is its own sanitized copy.
func FuzzSanitize(f *testing.F) {
	for _, s := range installConfigSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if bytes.Contains(doc, []byte(fuzzCanary[:6])) {
			return
		}
		raw := bytes.ReplaceAll(doc, []byte("$S"), []byte(fuzzCanary))
		out, err := Sanitize(raw)
		in, perr := Parse(raw)
		if err != nil {
			if perr == nil {
				t.Fatalf("Sanitize refuses %q, which parses: %v", raw, err)
			}
			// A field the install-config does not have is named: a key is
			// not a secret value.
			if strings.Contains(unknownField.ReplaceAllString(err.Error(), ""), fuzzCanary) {
				t.Fatalf("refusing %q, the error shows the secret: %v", raw, err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("Sanitize accepts %q, which does not parse: %v", raw, perr)
		}
		if has, err := HasSecrets(out); has || err != nil {
			t.Fatalf("the sanitized copy of %q holds secrets (%v): %s", raw, err, out)
		}
		got, err := Parse(out)
		if err != nil {
			t.Fatalf("the sanitized copy %q of %q does not parse: %v", out, raw, err)
		}
		kept := icJSON(t, withoutSecrets(in))
		if g := icJSON(t, got); g != kept {
			t.Fatalf("the sanitized copy of %q reads as\n%s\nnot as the input without its secrets\n%s", raw, g, kept)
		}
		if !strings.Contains(kept, fuzzCanary) && strings.Contains(string(out), fuzzCanary) {
			t.Fatalf("the sanitized copy of %q holds the secret: %s", raw, out)
		}
		if again, err := Sanitize(out); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("sanitizing the copy again gives %q (%v), not %q", again, err, out)
		}
	})
}

// FuzzValidate checks what users and logs see of an install-config that
// parses: Validate's errors name no secret (the pull secret, a BMC username
// or password, an address's userinfo) unless a field that is not secret
// holds the same text; the same document gets the same errors; and the
// document written out again reads the same (what the installer writes,
// the bootstrap node reads strictly). testdata/fuzz/FuzzValidate holds a
// BMC password with a '?', which the address redaction once showed.
func FuzzValidate(f *testing.F) {
	for _, s := range installConfigSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		raw := bytes.ReplaceAll(doc, []byte("$S"), []byte(fuzzCanary))
		ic, err := Parse(raw)
		if err != nil {
			return
		}
		msg := ic.Validate().ToAggregate()
		if again := ic.Validate().ToAggregate(); (msg == nil) != (again == nil) || (msg != nil && msg.Error() != again.Error()) {
			t.Fatalf("%q validates two ways: %v, then %v", raw, msg, again)
		}
		if msg != nil {
			// What the errors may show: the fields that are not secret.
			// BMC addresses are left out, as what they may show of an
			// address is the question.
			cleared := withoutSecrets(ic)
			if bm := cleared.Platform.BareMetal; bm != nil {
				for i := range bm.Hosts {
					bm.Hosts[i].BMC.Address = ""
				}
			}
			kept := icJSON(t, cleared)
			vocabulary := ""
			if e := cleared.Validate().ToAggregate(); e != nil {
				vocabulary = e.Error()
			}
			for _, s := range secretsOf(ic) {
				if len(s) >= 6 && !strings.Contains(kept, s) && !strings.Contains(vocabulary, s) && strings.Contains(msg.Error(), s) {
					t.Fatalf("validating %q, the errors show the secret %q: %v", raw, s, msg)
				}
			}
		}
		out, err := yaml.Marshal(ic)
		if err != nil {
			t.Fatalf("writing %q: %v", raw, err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("%q parses, but written out as %q it does not: %v", raw, out, err)
		}
		if a, b := icJSON(t, ic), icJSON(t, back); a != b {
			t.Fatalf("%q reads as\n%s\nwritten out and read again as\n%s", raw, a, b)
		}
	})
}

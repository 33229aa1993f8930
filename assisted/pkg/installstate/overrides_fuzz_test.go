package installstate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4"

	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/internal/ignition"
)

// overridesCanary stands for a secret: "$S" in fuzzed overrides becomes it.
const overridesCanary = "Zq7-c4nary-secret"

// unknownField is how encoding/json names a field it does not know.
var unknownField = regexp.MustCompile(`unknown field "(?:[^"\\]|\\.)*"`)

// FuzzApplyOverrides checks the promise of the install-config overrides
// annotation: overrides the install accepts render (the install state is
// made, its install-config reads back strictly as the one accepted, and
// the bootstrap node's Ignition renders with it), and laying them over the
// result again changes nothing; overrides it refuses get an
// *OverridesError with upstream's prefix that shows no value from them (it
// names unknown fields).
func FuzzApplyOverrides(f *testing.F) {
	for _, s := range []string{
		`{"networking":{"networkType": "OVNKubernetes"},"fips":true}`,
		`{"networking":{"serviceNetwork":["172.31.0.0/16"]},"compute":[{"name":"worker","replicas":2}]}`,
		`{"controlPlane":{"replicas":3},"sshKey":"ssh-ed25519 AAAA"}`,
		`{"networking":null}`, `{"metadata":null}`, `{"platform":{"none":null,"baremetal":{"apiVIPs":["192.0.2.9"]}}}`,
		`{"pullSecret":"$S"}`, `{"PULLSECRET":"$S"}`,
		`{"platform":{"baremetal":{"hosts":[{"name":"h","bmc":{"address":"redfish://root:$S@10.0.0.1","password":"$S"}}]}}}`,
		`{"fips":"$S"}`, `{"$S":1}`, `{"fips":true} {}`, `[1]`, `{fips:true}`, `{"fips":true`, "  ", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, overrides string) {
		if strings.Contains(overrides, overridesCanary[:6]) {
			return
		}
		overrides = strings.ReplaceAll(overrides, "$S", overridesCanary)
		in := inputs(overrides)
		ic, err := InstallConfig(in)
		if err != nil {
			var oe *OverridesError
			if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), "Failed to parse 'agent-install.openshift.io/install-config-overrides' annotation: ") {
				t.Fatalf("overrides %q are refused with %T %v, not an OverridesError", overrides, err, err)
			}
			if strings.Contains(unknownField.ReplaceAllString(err.Error(), ""), overridesCanary) {
				t.Fatalf("refusing overrides %q, the error shows a value from them: %v", overrides, err)
			}
			return
		}
		again := &installconfig.InstallConfig{} // a deep copy
		if err := json.Unmarshal([]byte(mustJSON(t, ic)), again); err != nil {
			t.Fatal(err)
		}
		if err := ApplyOverrides(again, overrides); err != nil || mustJSON(t, again) != mustJSON(t, ic) {
			t.Fatalf("overrides %q laid over their own result give %s (%v), not %s", overrides, mustJSON(t, again), err, mustJSON(t, ic))
		}
		st, err := New(in)
		if err != nil {
			t.Fatalf("overrides %q are accepted, but the install state is not made: %v", overrides, err)
		}
		back, err := installconfig.Parse(st.InstallConfig)
		if err != nil {
			t.Fatalf("overrides %q are accepted, but the install-config %q does not read back: %v", overrides, st.InstallConfig, err)
		}
		if a, b := mustJSON(t, back), mustJSON(t, ic); a != b {
			t.Fatalf("overrides %q: the install state's install-config reads as %s, not %s", overrides, a, b)
		}
		if _, err := HostIgnition(st, "test-cluster.example.com", "master", true, false, []byte(`{"auths":{}}`), in.Version, nil); err != nil {
			t.Fatalf("overrides %q are accepted, but the bootstrap node's Ignition does not render: %v", overrides, err)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzHostIgnitionOverride checks an Agent's ignitionConfigOverrides: one
// the Agent controller accepts (specError: an Ignition config Ignition 3.4
// reads, 3.0 to 3.4, without errors) renders into every Ignition a host of
// the install gets (a master's or worker's pointer config, the bootstrap
// node's), merged byte for byte; one it refuses is refused by every
// renderer with ignition.ErrInvalidOverride, so that a host never gets an
// Ignition without its override.
func FuzzHostIgnitionOverride(f *testing.F) {
	st, err := New(inputs(""))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}}`,
		`{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}}`,
		`{"ignition":{"version":"3.0.0"}}`, `{"ignition":{"version":"3.5.0-experimental"}}`, `{"ignition":{"version":"2.2.0"}}`,
		`{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"relative"}]}}`, `{}`, `null`, `[]`, `{"ignition":{"version":"3.1.0"}} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, override []byte) {
		if len(override) == 0 {
			return // no override
		}
		_, rpt, perr := v3_4.ParseCompatibleVersion(override)
		accepted := perr == nil && !rpt.IsFatal()
		for _, r := range []struct {
			role      string
			bootstrap bool
		}{{"master", false}, {"worker", false}, {"master", true}} {
			ign, err := HostIgnition(st, "test-cluster.example.com", r.role, r.bootstrap, false, []byte(`{"auths":{}}`), "4.16.3", override)
			switch {
			case accepted && err != nil:
				t.Fatalf("the Agent accepts override %q, but the %s Ignition (bootstrap %v) does not render: %v", override, r.role, r.bootstrap, err)
			case !accepted && !errors.Is(err, ignition.ErrInvalidOverride):
				t.Fatalf("the Agent refuses override %q (%v %s), but the %s Ignition (bootstrap %v) gives %v", override, perr, rpt, r.role, r.bootstrap, err)
			case accepted && !bytes.Contains(ign, []byte(base64.StdEncoding.EncodeToString(override))):
				t.Fatalf("the %s Ignition (bootstrap %v) does not merge override %q as it is", r.role, r.bootstrap, override)
			}
		}
	})
}

package record

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// TestInstallerArgs: an Agent's installerArgs parse as a JSON array of
// coreos-installer arguments; only upstream's flags are allowed and values
// hold no white space or shell metacharacters; upstream's messages.
func TestInstallerArgs(t *testing.T) {
	const allowed = "allowed flags are [--append-karg --delete-karg -n --copy-network --network-dir --save-partlabel --save-partindex --image-url --image-file]"
	for _, tt := range []struct {
		name string
		args string
		want []string
		err  string
	}{
		{name: "none"},
		{name: "the seed's", args: `["--append-karg", "ip=192.0.2.2::192.0.2.254:255.255.255.0:core0.example.com:enp1s0:none", "--save-partindex", "1", "-n"]`,
			want: []string{"--append-karg", "ip=192.0.2.2::192.0.2.254:255.255.255.0:core0.example.com:enp1s0:none", "--save-partindex", "1", "-n"}},
		{name: "every flag", args: `["--append-karg","a","--delete-karg","b","-n","--copy-network","--network-dir","/etc/nm","--save-partlabel","data*","--save-partindex","5-","--image-url","https://example.com/os.raw.gz","--image-file","/tmp/os.raw"]`,
			want: []string{"--append-karg", "a", "--delete-karg", "b", "-n", "--copy-network", "--network-dir", "/etc/nm", "--save-partlabel", "data*",
				"--save-partindex", "5-", "--image-url", "https://example.com/os.raw.gz", "--image-file", "/tmp/os.raw"}},
		{name: "a URL with a query", args: `["--image-url","https://example.com/os.raw.gz?x"]`,
			err: "found unexpected chars in value https://example.com/os.raw.gz?x for installer"},
		{name: "empty list", args: `[]`, want: []string{}},
		{name: "unknown flag", args: `["--wrong-param", "x"]`, err: "found unexpected flag --wrong-param for installer - " + allowed},
		{name: "flag with its value", args: `["--append-karg=quiet"]`, err: "found unexpected flag --append-karg=quiet for installer - " + allowed},
		{name: "short flag", args: `["-i","ign.json"]`, err: "found unexpected flag -i for installer - " + allowed},
		{name: "space in a value", args: `["--append-karg","a b"]`, err: "found unexpected chars in value a b for installer"},
		{name: "shell in a value", args: `["--append-karg","x&&reboot"]`, err: "found unexpected chars in value x&&reboot for installer"},
		{name: "empty value", args: `["--append-karg",""]`, err: "found unexpected chars in value  for installer"},
		{name: "not JSON", args: `--append-karg quiet`,
			err: "Fail to unmarshal installer args for host h1 in infraEnv ie-uid: invalid character '-' in numeric literal"},
		{name: "not strings", args: `[1]`,
			err: "Fail to unmarshal installer args for host h1 in infraEnv ie-uid: json: cannot unmarshal number into Go value of type string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "h1", OwnerReferences: []metav1.OwnerReference{{Kind: "InfraEnv", UID: "ie-uid"}}},
				Spec: agentinstallv1.AgentSpec{InstallerArgs: tt.args}}
			got, err := InstallerArgs(a)
			if tt.err != "" {
				g.Expect(err).To(MatchError(tt.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

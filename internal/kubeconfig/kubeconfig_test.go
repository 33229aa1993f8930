package kubeconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeconfig is a kubeconfig whose current context is cluster c and user
// u, with the given lines under each.
func kubeconfig(cluster, user string) []byte {
	indent := func(s string) string {
		if s == "" {
			return " {}"
		}
		return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
	}
	return []byte("apiVersion: v1\nkind: Config\ncurrent-context: x\n" +
		"contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n" +
		"clusters:\n- name: c\n  cluster:" + indent(cluster) + "\n" +
		"users:\n- name: u\n  user:" + indent(user) + "\n" +
		// Another context the loader never looks at.
		"- name: other\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/false\n")
}

const (
	server = "server: https://api.example.com:6443"
	caData = "certificate-authority-data: Y2E="
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name          string
		cluster, user string
		refused       []string // the refusal's items, in order
		invalid       string   // an error other than a refusal
		want          *rest.Config
	}{
		{name: "token", cluster: server + "\n" + caData + "\ntls-server-name: api", user: "token: t0k3n",
			want: &rest.Config{Host: "https://api.example.com:6443", BearerToken: "t0k3n",
				TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), ServerName: "api"}}},
		{name: "client certificate", cluster: server + "\n" + caData, user: "client-certificate-data: Y2VydA==\nclient-key-data: a2V5",
			want: &rest.Config{Host: "https://api.example.com:6443",
				TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}},
		{name: "system roots, anonymous", cluster: server,
			want: &rest.Config{Host: "https://api.example.com:6443"}},
		{name: "exec", cluster: server, user: "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: /bin/sh\n  args: [-c, id]",
			refused: []string{"users[u].user.exec: an exec plugin would run a command in the hub's process"}},
		{name: "auth provider", cluster: server, user: "auth-provider:\n  name: oidc",
			refused: []string{"users[u].user.auth-provider: an auth provider plugin would run in the hub's process"}},
		{name: "token file", cluster: server, user: "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
			refused: []string{"users[u].user.tokenFile: a file path would read one of the hub's files; give the token inline (token)"}},
		{name: "key paths", cluster: server, user: "client-certificate: /etc/metalshift/tls.crt\nclient-key: /etc/metalshift/signing.key",
			refused: []string{
				"users[u].user.client-certificate: a file path would read one of the hub's files; give the client certificate inline (client-certificate-data)",
				"users[u].user.client-key: a file path would read one of the hub's files; give the client key inline (client-key-data)",
			}},
		{name: "CA path", cluster: server + "\ncertificate-authority: /etc/kubernetes/pki/ca.crt",
			refused: []string{"clusters[c].cluster.certificate-authority: a file path would read one of the hub's files; give the CA certificate inline (certificate-authority-data)"}},
		{name: "proxy", cluster: server + "\nproxy-url: http://attacker.example.com:3128", user: "token: t",
			refused: []string{"clusters[c].cluster.proxy-url: the hub does not connect through a proxy a kubeconfig names"}},
		{name: "insecure", cluster: server + "\ninsecure-skip-tls-verify: true", user: "token: t",
			refused: []string{"clusters[c].cluster.insecure-skip-tls-verify: the server's certificate must be verified; give its CA inline (certificate-authority-data)"}},
		{name: "impersonation", cluster: server, user: "token: t\nas: system:admin",
			refused: []string{"users[u].user.as: impersonation is not supported"}},
		{name: "impersonated groups", cluster: server, user: "token: t\nas-groups: [system:masters]",
			refused: []string{"users[u].user.as: impersonation is not supported"}},
		{name: "basic auth", cluster: server, user: "username: admin\npassword: secret",
			refused: []string{"users[u].user.username/password: basic authentication is not supported; use a token or a client certificate"}},
		{name: "everything at once, all named", cluster: server + "\nproxy-url: http://p\ninsecure-skip-tls-verify: true",
			user: "tokenFile: /t\nexec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: x",
			refused: []string{
				"clusters[c].cluster.insecure-skip-tls-verify: the server's certificate must be verified; give its CA inline (certificate-authority-data)",
				"clusters[c].cluster.proxy-url: the hub does not connect through a proxy a kubeconfig names",
				"users[u].user.exec: an exec plugin would run a command in the hub's process",
				"users[u].user.tokenFile: a file path would read one of the hub's files; give the token inline (token)",
			}},
		{name: "plain http", cluster: "server: http://api.example.com:6443", user: "token: t",
			invalid: "clusters[c].cluster.server: must be an https URL, not http"},
		{name: "no server", cluster: caData, invalid: "clusters[c].cluster.server: missing: the cluster's API URL, as in https://api.example.com:6443"},
		{name: "credentials in the URL", cluster: "server: https://admin:pw@api.example.com", invalid: "clusters[c].cluster.server: must not carry a username or password"},
		{name: "half a key pair", cluster: server, user: "client-certificate-data: Y2VydA==",
			invalid: "users[u].user: client-certificate-data and client-key-data go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			data := kubeconfig(tt.cluster, tt.user)
			cfg, err := Load(data)
			clean, serr := Sanitize(data)
			switch {
			case tt.refused != nil:
				g.Expect(err).To(MatchError(ErrRefused))
				var r *RefusedError
				g.Expect(errors.As(err, &r)).To(BeTrue())
				g.Expect(r.Refused).To(Equal(tt.refused))
				g.Expect(err.Error()).To(Equal("the kubeconfig is refused: " + strings.Join(tt.refused, "; ")))
				g.Expect(serr).To(MatchError(err.Error()))
				g.Expect(cfg).To(BeNil())
			case tt.invalid != "":
				g.Expect(err).To(MatchError(tt.invalid))
				g.Expect(err).NotTo(MatchError(ErrRefused))
				g.Expect(serr).To(MatchError(tt.invalid))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cfg).To(Equal(tt.want))
				// The sanitized kubeconfig is what client-go makes of it.
				g.Expect(serr).NotTo(HaveOccurred())
				viaClientGo, err := clientcmd.RESTConfigFromKubeConfig(clean)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(viaClientGo.Host).To(Equal(tt.want.Host))
				g.Expect(viaClientGo.BearerToken).To(Equal(tt.want.BearerToken))
				g.Expect(viaClientGo.TLSClientConfig).To(Equal(tt.want.TLSClientConfig))
			}
		})
	}
}

func TestLoadContexts(t *testing.T) {
	for name, tc := range map[string]struct{ data, want string }{
		"not YAML":                    {"{", "the kubeconfig cannot be read"},
		"empty":                       {"", "the kubeconfig has no current-context"},
		"no such context":             {"apiVersion: v1\nkind: Config\ncurrent-context: x\n", `the kubeconfig's current-context "x" is not one of its contexts`},
		"context without its cluster": {"apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n", `the kubeconfig's context "x" names cluster "c", which it does not have`},
		"context without its user":    {"apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'https://a'}\n", `the kubeconfig's context "x" names user "u", which it does not have`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Load([]byte(tc.data))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err).NotTo(MatchError(ErrRefused))
		})
	}
}

// TestNothingRuns: what a refused kubeconfig asks for does not happen —
// the exec plugin's command does not run, the hub's file is not read into
// the configuration.
func TestNothingRuns(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	token := filepath.Join(dir, "token")
	g.Expect(os.WriteFile(token, []byte("hub-canary-token"), 0o600)).To(Succeed())
	data := kubeconfig(server, "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  interactiveMode: Never\n  command: /bin/sh\n  args: [-c, 'touch "+marker+"']\n"+
		"tokenFile: "+token)
	_, err := Load(data)
	g.Expect(err).To(MatchError(ErrRefused))
	g.Expect(err.Error()).NotTo(ContainSubstring("hub-canary-token"))
	g.Expect(marker).NotTo(BeAnExistingFile())
}

// secretReader serves one Secret.
type secretReader struct {
	client.Reader
	s *corev1.Secret
}

func (r secretReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.s.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func TestSanitizingSecrets(t *testing.T) {
	g := NewWithT(t)
	key := client.ObjectKey{Namespace: "a", Name: "c-kubeconfig"}
	read := func(data []byte) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		err := SanitizingSecrets{secretReader{s: &corev1.Secret{Data: map[string][]byte{"value": data}}}}.Get(context.Background(), key, s)
		return s, err
	}
	s, err := read(kubeconfig(server+"\n"+caData, "token: t"))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.BearerToken).To(Equal("t"))

	_, err = read(kubeconfig(server, "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"))
	g.Expect(err).To(MatchError(ErrRefused))
	g.Expect(err.Error()).To(HavePrefix("kubeconfig Secret a/c-kubeconfig: the kubeconfig is refused: users[u].user.tokenFile: "))
}

// FuzzLoad: whatever the bytes, a configuration Load returns holds inline
// credentials only, for an https server.
func FuzzLoad(f *testing.F) {
	f.Add(kubeconfig(server+"\n"+caData, "token: t"))
	f.Add(kubeconfig(server, "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: /bin/sh"))
	f.Add(kubeconfig(server+"\nproxy-url: http://p", "tokenFile: /t\nas: admin"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","current-context":"x","contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],` +
		`"clusters":[{"name":"c","cluster":{"server":"https://a"}}],"users":[{"name":"u","user":{"client-key":"/k"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load(data)
		clean, serr := Sanitize(data)
		if (err == nil) != (serr == nil) {
			t.Fatalf("Load and Sanitize disagree: %v, %v", err, serr)
		}
		if err != nil {
			return
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" ||
			cfg.CAFile != "" || cfg.Proxy != nil || cfg.Impersonate.UserName != "" || len(cfg.Impersonate.Groups) > 0 ||
			cfg.Username != "" || cfg.Password != "" || cfg.Insecure || !strings.HasPrefix(cfg.Host, "https://") {
			t.Fatalf("Load accepted a configuration that is not inline-only: %+v", cfg)
		}
		again, err := Load(clean)
		if err != nil {
			t.Fatalf("the sanitized kubeconfig is refused: %v", err)
		}
		if again.Host != cfg.Host || again.BearerToken != cfg.BearerToken {
			t.Fatalf("the sanitized kubeconfig differs: %+v, %+v", again, cfg)
		}
	})
}

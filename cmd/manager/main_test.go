package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env        *testenv.Env
	managerBin string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		tmp, err := os.MkdirTemp("", "metalshift-manager-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(tmp)
		managerBin = filepath.Join(tmp, "manager")
		if out, err := exec.Command("go", "build", "-o", managerBin, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the manager: %v\n%s", err, out)
			return 1
		}
		return testenv.Run(m, &env, testenv.Options{})
	}())
}

// kubeconfig writes a kubeconfig for the test environment's admin.
func kubeconfig(t *testing.T) string {
	t.Helper()
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["env"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	cfg.Contexts["env"] = &clientcmdapi.Context{Cluster: "env", AuthInfo: "admin"}
	cfg.CurrentContext = "env"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServersFromFlags: the production manager runs the deploy server and
// the ignition server from its flags, signing with the key file's key.
func TestServersFromFlags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	g.Expect(os.WriteFile(keyFile, key, 0o600)).To(Succeed())
	// The manager is another process: it is told reserved ports, which
	// nothing else binds before it does.
	deployAddr, ignitionAddr := testenv.ReservedAddr(t), testenv.ReservedAddr(t)

	cmd := exec.Command(managerBin, "--webhook-port=0", "--metrics-bind-address=0", "--health-addr="+testenv.ReservedAddr(t),
		"--deploy-listen-address="+deployAddr, "--ignition-listen-address="+ignitionAddr, "--signing-key-file="+keyFile,
		"--deploy-insecure-http", "--ignition-insecure-http")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig(t))
	logs, err := os.Create(filepath.Join(t.TempDir(), "manager.log"))
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stdout, cmd.Stderr = logs, logs
	g.Expect(cmd.Start()).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			out, _ := os.ReadFile(logs.Name())
			t.Logf("manager log:\n%s", out)
		}
	})

	status := func(url, auth string) func() int {
		return func() int {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
	}
	g.Eventually(status("http://"+deployAddr+"/images/deploy.iso", ""), time.Minute).Should(Equal(http.StatusForbidden), "unsigned image URL")
	g.Eventually(status("http://"+ignitionAddr+"/ignition/v1/x/y", ""), time.Minute).Should(Equal(http.StatusUnauthorized))

	// A served config, and a token made with the key from the file.
	ns := env.Namespace(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
	served := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cfg-ignition", Namespace: ns,
		Labels:          map[string]string{ignitionserver.ServedLabel: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Controller: ptr.To(true)}},
	}, Data: map[string][]byte{"value": []byte(`{"ignition":{"version":"3.4.0"}}`)}}
	g.Expect(env.Client.Create(ctx, served)).To(Succeed())
	signer, err := ignitionserver.New(ignitionserver.Options{Key: key, BaseURL: "http://" + ignitionAddr})
	g.Expect(err).NotTo(HaveOccurred())
	url := signer.URL(ns, served.Name)
	g.Expect(status(url, "Bearer "+signer.Token(ns, served.Name, owner.UID))()).To(Equal(http.StatusOK))
	g.Expect(status(url, "Bearer "+signer.Token(ns, served.Name, "other"))()).To(Equal(http.StatusForbidden))
}

// TestServersNeedTLSOrInsecure: a server machines reach serves https, or
// plain http only when its flag says so.
func TestServersNeedTLSOrInsecure(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	NewWithT(t).Expect(os.WriteFile(keyFile, bytes.Repeat([]byte("k"), 32), 0o600)).To(Succeed())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"deploy server", []string{"--deploy-listen-address=127.0.0.1:0"}, "give --deploy-cert-file, --deploy-key-file and --deploy-ca-file (or --deploy-insecure-http"},
		{"agent service", []string{"--agent-service-listen-address=127.0.0.1:0"}, "give --agent-service-cert-file"},
		{"ignition server", []string{"--ignition-listen-address=127.0.0.1:0"}, "give --ignition-cert-file"},
		{"no CA", []string{"--deploy-listen-address=127.0.0.1:0", "--deploy-cert-file=" + keyFile, "--deploy-key-file=" + keyFile}, "--deploy-ca-file is required"},
		{"both", []string{"--deploy-listen-address=127.0.0.1:0", "--deploy-cert-file=" + keyFile, "--deploy-key-file=" + keyFile, "--deploy-insecure-http"},
			"--deploy-insecure-http serves plain http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := exec.Command(managerBin, append(tc.args, "--signing-key-file="+keyFile)...).CombinedOutput()
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.(*exec.ExitError).ExitCode()).To(Equal(2))
			g.Expect(string(out)).To(ContainSubstring(tc.want))
		})
	}
}

// TestServersNeedASigningKey: a server without a signing key is a usage
// error, said before anything starts.
func TestServersNeedASigningKey(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command(managerBin, "--ignition-listen-address=127.0.0.1:0").CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.(*exec.ExitError).ExitCode()).To(Equal(2))
	g.Expect(string(out)).To(ContainSubstring("--signing-key-file is required"))

	short := filepath.Join(t.TempDir(), "short.key")
	g.Expect(os.WriteFile(short, []byte("too short"), 0o600)).To(Succeed())
	out, err = exec.Command(managerBin, "--deploy-listen-address=127.0.0.1:0", "--signing-key-file="+short).CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("needs at least 32 bytes, it has 9"))
}

// Package bindtest runs a real DNS server for tests: Debian's BIND
// (named, which hack/deps.sh installs), in the test's own directory on a
// reserved loopback port, serving one zone that takes updates signed with
// a TSIG key, and reads records back through Go's own resolver.
package bindtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/onsi/gomega"

	"github.com/metalshift/metalshift/internal/ports"
	"github.com/metalshift/metalshift/localcp"
)

// The zone a BIND serves and the name of the key that may update it.
const (
	Zone    = "example.com."
	KeyName = "metalshift-test."
)

// BIND is a running named serving Zone, which takes updates signed with
// the key KeyName, Algorithm and Secret (base64).
type BIND struct {
	Addr                       string
	Zone                       string
	KeyName, Algorithm, Secret string
	log                        string
}

// repoRoot is the directory of the module's go.mod, above the test's
// working directory.
func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// namedPath finds named, and installs bind9 with hack/deps.sh when it is
// missing (as make test does first); the test is skipped only when named
// is still missing after that, saying why.
func namedPath(t testing.TB) string {
	t.Helper()
	find := func() string {
		if p, err := exec.LookPath("named"); err == nil {
			return p
		}
		// /usr/sbin is not on every user's PATH.
		if _, err := os.Stat("/usr/sbin/named"); err == nil {
			return "/usr/sbin/named"
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	out, err := exec.Command(filepath.Join(repoRoot(t), "hack", "deps.sh"), "bind9").CombinedOutput()
	if p := find(); p != "" {
		return p
	}
	t.Skipf("named (Debian's bind9) is missing and hack/deps.sh bind9 could not install it (%v):\n%s", err, out)
	return ""
}

// Start starts named on a reserved port with an empty Zone and a random
// TSIG key, and waits until it answers for the zone. It is killed when the
// test ends, or with the test binary.
func Start(t testing.TB) *BIND {
	t.Helper()
	g := gomega.NewWithT(t)
	named := namedPath(t)
	dir := t.TempDir()
	// named is another process: it is told a reserved port, which nothing
	// else binds before it does. The reservation is held until named is
	// gone (cleanups run last registered first).
	port, err := ports.Reserve(0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(port.Release)

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	b := &BIND{Addr: port.Addr(), Zone: Zone, KeyName: KeyName, Algorithm: "hmac-sha256",
		Secret: base64.StdEncoding.EncodeToString(secret), log: filepath.Join(dir, "named.log")}
	// Everything named writes is in dir: no command channel (its port,
	// 953, is shared by every named on the machine), no notifies, no
	// recursion.
	conf := fmt.Sprintf(`options {
	directory %[1]q;
	pid-file %[2]q;
	session-keyfile %[3]q;
	managed-keys-directory %[1]q;
	listen-on port %[4]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	notify no;
	dnssec-validation no;
};
controls { };
key %[5]q {
	algorithm hmac-sha256;
	secret %[6]q;
};
zone %[7]q {
	type primary;
	file "zone.db";
	update-policy { grant %[5]s zonesub ANY; };
};
`, dir, filepath.Join(dir, "named.pid"), filepath.Join(dir, "session.key"), port.Port, KeyName, b.Secret, Zone)
	zone := `$TTL 60
@	IN SOA ns1 hostmaster 1 60 60 600 60
@	IN NS ns1
ns1	IN A 127.0.0.1
`
	g.Expect(os.WriteFile(filepath.Join(dir, "named.conf"), []byte(conf), 0o600)).To(gomega.Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "zone.db"), []byte(zone), 0o600)).To(gomega.Succeed())

	log, err := os.Create(b.log)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer log.Close()
	// Debian confines /usr/sbin/named with an AppArmor profile that lets
	// it read and write BIND's own directories only, not dir. AppArmor
	// picks a profile by the program's path, so a copy in dir runs
	// unconfined; where dir is mounted noexec, the installed one runs (and
	// works where AppArmor is off).
	start := func(bin string) (*exec.Cmd, error) {
		// -g: in the foreground, logging to stderr; -n 1: one worker
		// thread is plenty, on a machine that runs other tests too.
		cmd := exec.Command(bin, "-g", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		return cmd, localcp.Spawn(cmd)
	}
	copied := filepath.Join(dir, "named")
	err = copyExecutable(named, copied)
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = start(copied)
	}
	if err != nil {
		cmd, err = start(named)
	}
	g.Expect(err).NotTo(gomega.HaveOccurred())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		// Killed: its exit status says so and nothing more.
		if err := <-exited; err != nil && t.Failed() {
			t.Logf("named: %v", err)
		}
		if t.Failed() {
			out, _ := os.ReadFile(b.log)
			t.Logf("named's log:\n%s", out)
		}
	})

	// Ready once it answers a SOA query for the zone with authority.
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion(Zone, dns.TypeSOA)
	g.Eventually(func() error {
		select {
		case err := <-exited:
			exited <- err
			out, _ := os.ReadFile(b.log)
			gomega.StopTrying(fmt.Sprintf("named exited: %v; its log:\n%s", err, out)).Now()
		default:
		}
		r, _, err := c.Exchange(q, b.Addr)
		switch {
		case err != nil:
			return err
		case r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) == 0:
			return fmt.Errorf("SOA of %s: %s, authoritative %v, %d answers", Zone, dns.RcodeToString[r.Rcode], r.Authoritative, len(r.Answer))
		}
		return nil
	}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(gomega.Succeed())
	return b
}

// Lookup asks b, through Go's own resolver, for host's addresses, sorted.
func (b *BIND) Lookup(host string) ([]string, error) {
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, b.Addr)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, host)
	slices.Sort(addrs)
	return addrs, err
}

// ExpectAddrs expects host to have exactly addrs on b.
func (b *BIND) ExpectAddrs(t testing.TB, host string, addrs ...string) {
	t.Helper()
	got, err := b.Lookup(host)
	gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred(), host)
	slices.Sort(addrs)
	gomega.NewWithT(t).Expect(got).To(gomega.Equal(addrs), host)
}

// ExpectNotFound expects host to have no address on b.
func (b *BIND) ExpectNotFound(t testing.TB, host string) {
	t.Helper()
	got, err := b.Lookup(host)
	var dnsErr *net.DNSError
	gomega.NewWithT(t).Expect(errors.As(err, &dnsErr) && dnsErr.IsNotFound).To(gomega.BeTrue(), "%s: want not found, got %v, %v", host, got, err)
}

// copyExecutable copies the program from to to.
func copyExecutable(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o700)
}

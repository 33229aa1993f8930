package deployserver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/imageservice"
)

func get200(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestMetalCloudBoot: a device's iPXE script, signed by its provider,
// loads the kernel, the initramfs and an initrd whose boot configuration
// is exactly what was signed, each with the same query; a query that was
// changed (another image), signed with another key, expired or missing is
// refused before anything is served, on every path.
func TestMetalCloudBoot(t *testing.T) {
	g := NewWithT(t)
	_, base := deployServer(t)
	boot := deployapi.MetalCloudBoot{Machine: "ns/worker-0/0d6e",
		MetalCloud: deployapi.MetalCloud{MetadataURL: "http://metadata.example", Image: deployapi.Image{URL: "http://images.example/os.raw", Checksum: "ab12"}}}
	q, err := deployapi.SignMetalCloudQuery(key, boot, time.Now().Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())

	code, script := get200(t, base+deployapi.MetalCloudScriptPath+"?"+q)
	g.Expect(code).To(Equal(http.StatusOK))
	b, err := imageservice.ParseIPXEScript(string(script))
	g.Expect(err).NotTo(HaveOccurred())
	// The script loads from the server's base URL, every file with the
	// signed query.
	g.Expect(b.KernelURL).To(Equal("http://deploy.example:6180" + deployapi.MetalCloudKernelPath + "?" + q))
	var hostURL string
	for _, in := range b.Initrds {
		g.Expect(in.URL).To(HaveSuffix("?" + q))
		if in.Name == "host.img" {
			hostURL = in.URL
		}
	}
	g.Expect(hostURL).NotTo(BeEmpty())
	local := func(u string) string { return strings.Replace(u, "http://deploy.example:6180", base, 1) }
	code, _ = get200(t, local(b.KernelURL))
	g.Expect(code).To(Equal(http.StatusOK))
	code, data := get200(t, local(hostURL))
	g.Expect(code).To(Equal(http.StatusOK))
	cfg, err := imageservice.ReadHostInitrd(bytes.NewReader(data))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.MetalCloud).To(Equal(&boot.MetalCloud))
	g.Expect(cfg.HostID).To(BeEmpty())
	g.Expect(cfg.Ticket).To(BeEmpty())

	values, err := url.ParseQuery(q)
	g.Expect(err).NotTo(HaveOccurred())
	other := boot
	other.Image.URL = "http://attacker.example/os.raw"
	forged, err := deployapi.SignMetalCloudQuery([]byte("another-key-another-key-another!!"), other, time.Now().Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	swapped, err := deployapi.SignMetalCloudQuery(key, other, time.Now().Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	swappedValues, _ := url.ParseQuery(swapped)
	tampered := url.Values{"boot": swappedValues["boot"], "expires": values["expires"], "signature": values["signature"]}
	expired, err := deployapi.SignMetalCloudQuery(key, boot, time.Now().Add(-time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	for name, query := range map[string]string{"another key": forged, "another image": tampered.Encode(), "expired": expired, "none": ""} {
		for _, p := range []string{deployapi.MetalCloudScriptPath, deployapi.MetalCloudKernelPath, deployapi.MetalCloudInitrdPath, deployapi.MetalCloudHostPath} {
			code, body := get200(t, base+p+"?"+query)
			g.Expect(code).To(Equal(http.StatusForbidden), "%s %s", name, p)
			g.Expect(string(body)).NotTo(ContainSubstring("attacker"))
		}
	}
}

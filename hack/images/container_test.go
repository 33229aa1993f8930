package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/internal/ociimage"
	"github.com/metalshift/metalshift/manager"
)

// TestManagerImage builds the real manager's image as `make images` does,
// checks what a runtime reads from it, runs the manager out of its layer,
// and builds it again for the same digest and bytes.
func TestManagerImage(t *testing.T) {
	g := NewWithT(t)
	out := t.TempDir()
	var logs bytes.Buffer
	b := &builder{out: out, cache: filepath.Join(out, "cache"), logf: func(format string, args ...any) {
		fmt.Fprintf(&logs, format+"\n", args...)
	}}
	g.Expect(os.MkdirAll(b.cache, 0o750)).To(Succeed())
	ca := filepath.Join(out, "ca.crt")
	g.Expect(os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644)).To(Succeed())
	created := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	// Stand-ins for the live images, which need Debian's tools to build.
	live := filepath.Join(out, "live")
	g.Expect(os.MkdirAll(live, 0o750)).To(Succeed())
	for _, name := range liveImageFiles {
		g.Expect(os.WriteFile(filepath.Join(live, name), []byte("live image "+name), 0o644)).To(Succeed())
	}
	opts := imageOptions{version: "v0.1.0-test", revision: "0123abc", created: created, platforms: []string{"linux/amd64"}, caBundle: ca, live: live}

	g.Expect(b.managerImage(opts, false)).To(Succeed())
	// What follows writes the image of the binary built here, which the
	// working tree, edited meanwhile, would not rebuild the same.
	bins := map[string]string{"linux/amd64": filepath.Join(b.cache, "manager-linux-amd64")}
	dir := filepath.Join(out, "oci", "manager")
	var stamp ImageStamp
	data, err := os.ReadFile(dir + ".json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &stamp)).To(Succeed())
	g.Expect(stamp.Reference).To(Equal("ghcr.io/metalshift/manager:v0.1.0-test"))

	lp, err := layout.FromPath(dir)
	g.Expect(err).NotTo(HaveOccurred())
	top, err := lp.ImageIndex()
	g.Expect(err).NotTo(HaveOccurred())
	tm, err := top.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tm.Manifests).To(HaveLen(1))
	g.Expect(tm.Manifests[0].Digest.String()).To(Equal(stamp.Digest))
	g.Expect(tm.Manifests[0].Annotations).To(HaveKeyWithValue(ociimage.RefNameAnnotation, "v0.1.0-test"))
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(validate.Index(idx)).To(Succeed())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(1))
	g.Expect(im.Manifests[0].Platform.String()).To(Equal("linux/amd64"))
	img, err := idx.Image(im.Manifests[0].Digest)
	g.Expect(err).NotTo(HaveOccurred())

	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/manager"}))
	g.Expect(cfg.Config.User).To(Equal("65532:65532"))
	g.Expect(cfg.Created.Time.Equal(created)).To(BeTrue())
	g.Expect(cfg.Config.Labels).To(Equal(map[string]string{
		"org.opencontainers.image.title":       "metalshift manager",
		"org.opencontainers.image.description": "The hub's controllers: Cluster API core and every metalshift component",
		"org.opencontainers.image.source":      "https://github.com/metalshift/metalshift",
		"org.opencontainers.image.version":     "v0.1.0-test",
		"org.opencontainers.image.revision":    "0123abc",
		"org.opencontainers.image.created":     "2026-11-25T12:00:00Z",
	}))

	// Two layers: the live images, where the Deployments that serve them
	// name them (--live-image-dir), then the rest.
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(2))
	g.Expect(layerNames(t, layers[0].Uncompressed)).To(Equal([]string{
		"usr/", "usr/share/", "usr/share/metalshift/", "usr/share/metalshift/live/",
		"usr/share/metalshift/live/metalshift-live.initrd", "usr/share/metalshift/live/metalshift-live.iso", "usr/share/metalshift/live/metalshift-live.vmlinuz",
	}))
	g.Expect(manager.ImageLiveDir).To(Equal("/usr/share/metalshift/live"))
	for _, name := range liveImageFiles {
		hdr, data := layerFile(t, layers[0].Uncompressed, "usr/share/metalshift/live/"+name)
		g.Expect(string(data)).To(Equal("live image " + name))
		g.Expect(hdr.Mode).To(Equal(int64(0o644)), "readable by the manager's user")
		g.Expect([]int{hdr.Uid, hdr.Gid}).To(Equal([]int{0, 0}))
	}
	g.Expect(layerNames(t, layers[1].Uncompressed)).To(Equal([]string{
		"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"home/", "home/nonroot/", "manager", "root/", "tmp/",
	}))

	// /manager: root's, 0755, static (no program interpreter), and it runs.
	hdr, managerBin := layerFile(t, layers[1].Uncompressed, "manager")
	g.Expect(hdr.Mode).To(Equal(int64(0o755)))
	g.Expect([]int{hdr.Uid, hdr.Gid}).To(Equal([]int{0, 0}))
	bin := filepath.Join(t.TempDir(), "manager")
	g.Expect(os.WriteFile(bin, managerBin, hdr.FileInfo().Mode().Perm())).To(Succeed())
	f, err := elf.Open(bin)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range f.Progs {
		g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "the manager is dynamically linked")
	}
	g.Expect(f.Close()).To(Succeed())
	help, err := exec.Command(bin, "--help").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", help)
	g.Expect(string(help)).To(ContainSubstring("--kubeconfig"))
	g.Expect(string(help)).To(ContainSubstring("--leader-elect"))

	// Up to date: nothing is written.
	before, err := os.Stat(filepath.Join(dir, "index.json"))
	g.Expect(err).NotTo(HaveOccurred())
	logs.Reset()
	g.Expect(b.writeManagerImage(opts, bins, false)).To(Succeed())
	g.Expect(logs.String()).To(ContainSubstring("up to date"))
	after, err := os.Stat(filepath.Join(dir, "index.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(before, after)).To(BeTrue())

	// Built again: the same digest.
	g.Expect(b.writeManagerImage(opts, bins, true)).To(Succeed())
	data, err = os.ReadFile(dir + ".json")
	g.Expect(err).NotTo(HaveOccurred())
	var again ImageStamp
	g.Expect(json.Unmarshal(data, &again)).To(Succeed())
	g.Expect(again).To(Equal(stamp))

	// Other live images: another image, with the same manager layer.
	g.Expect(os.WriteFile(filepath.Join(live, liveImageFiles[0]), []byte("rebuilt"), 0o644)).To(Succeed())
	logs.Reset()
	g.Expect(b.writeManagerImage(opts, bins, false)).To(Succeed())
	g.Expect(logs.String()).NotTo(ContainSubstring("up to date"))
	data, err = os.ReadFile(dir + ".json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &again)).To(Succeed())
	g.Expect(again.Digest).NotTo(Equal(stamp.Digest))

	// Another version: another image.
	opts.version = "v0.1.1-test"
	g.Expect(b.writeManagerImage(opts, bins, false)).To(Succeed())
	data, err = os.ReadFile(dir + ".json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &again)).To(Succeed())
	g.Expect(again.Reference).To(Equal("ghcr.io/metalshift/manager:v0.1.1-test"))
	g.Expect(again.Digest).NotTo(Equal(stamp.Digest))
}

// layerNames are the names of a layer's entries, in their order.
func layerNames(t *testing.T, open func() (io.ReadCloser, error)) []string {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

// layerFile returns the header and content of name in a layer.
func layerFile(t *testing.T, open func() (io.ReadCloser, error), name string) (*tar.Header, []byte) {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s is not in the layer", name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return hdr, data
		}
	}
}

func TestImageOptionsFromGit(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1764072000")
	o := imageOptions{version: "v0.1.0"}
	g.Expect(resolveImageOptions(&o)).To(Succeed())
	g.Expect(o.created).To(Equal(time.Unix(1764072000, 0).UTC()))
	g.Expect(o.version).To(Equal("v0.1.0"))
	g.Expect(o.revision).To(HaveLen(40))

	g.Expect(resolveImageOptions(&imageOptions{})).To(MatchError(ContainSubstring("version is required")))

	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	g.Expect(resolveImageOptions(&imageOptions{version: "v1"})).To(MatchError(ContainSubstring("SOURCE_DATE_EPOCH")))
}

func TestManagerPlatforms(t *testing.T) {
	b := &builder{cache: t.TempDir()}
	for _, p := range []string{"windows/amd64", "linux", "linux/arm/v7", ""} {
		t.Run(p, func(t *testing.T) {
			_, err := b.managerBinaries([]string{p})
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("want linux/<GOARCH>")))
		})
	}
}

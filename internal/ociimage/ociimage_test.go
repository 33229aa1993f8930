package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	. "github.com/onsi/gomega"
)

const testRef = "registry.example/metalshift/hello:v1.2.3-4-gabcdef0"

var testCreated = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// helloBinary builds testdata/hello, static, for linux on arch.
func helloBinary(t *testing.T, arch string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hello-"+arch)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, o)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// testSpec is an image like hack/images' manager image: Base, the binary
// at /hello, entrypoint, non-root user and labels, for amd64 and arm64.
func testSpec(t *testing.T) Spec {
	t.Helper()
	spec := Spec{
		Reference: testRef,
		Created:   testCreated,
		Config: v1.Config{
			Entrypoint: []string{"/hello"},
			User:       "65532:65532",
			WorkingDir: "/",
			Labels:     map[string]string{"org.opencontainers.image.version": "v1.2.3-4-gabcdef0"},
		},
		Files: Base([]byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n")),
	}
	for _, arch := range []string{"amd64", "arm64"} {
		spec.Platforms = append(spec.Platforms, Platform{
			Platform: v1.Platform{OS: "linux", Architecture: arch},
			Files:    []File{{Path: "hello", Mode: 0o755, Data: helloBinary(t, arch)}},
		})
	}
	return spec
}

func buildLayout(t *testing.T, spec Spec, dir string) v1.Hash {
	t.Helper()
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := Write(dir, spec.Reference, idx)
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func TestLayout(t *testing.T) {
	g := NewWithT(t)
	spec := testSpec(t)
	dir := filepath.Join(t.TempDir(), "hello")
	digest := buildLayout(t, spec, dir)

	// index.json: one entry, the image index, named by its tag and by its
	// whole reference.
	lp, err := layout.FromPath(dir)
	g.Expect(err).NotTo(HaveOccurred())
	top, err := lp.ImageIndex()
	g.Expect(err).NotTo(HaveOccurred())
	topManifest, err := top.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(topManifest.Manifests).To(HaveLen(1))
	desc := topManifest.Manifests[0]
	g.Expect(desc.MediaType).To(Equal(types.OCIImageIndex))
	g.Expect(desc.Digest).To(Equal(digest))
	g.Expect(desc.Annotations).To(Equal(map[string]string{
		RefNameAnnotation:   "v1.2.3-4-gabcdef0",
		ImageNameAnnotation: testRef,
	}))

	idx, err := top.ImageIndex(digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(validate.Index(idx)).To(Succeed())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(2))
	var archs []string
	for _, m := range im.Manifests {
		g.Expect(m.MediaType).To(Equal(types.OCIManifestSchema1))
		g.Expect(m.ArtifactType).To(BeEmpty())
		g.Expect(m.Platform).NotTo(BeNil())
		g.Expect(m.Platform.OS).To(Equal("linux"))
		archs = append(archs, m.Platform.Architecture)

		img, err := idx.Image(m.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		checkImage(t, img, m.Platform.Architecture)
		if m.Platform.Architecture == runtime.GOARCH && runtime.GOOS == "linux" {
			runHello(t, img)
		}
	}
	g.Expect(archs).To(ConsistOf("amd64", "arm64"))

	// Any user's tools can read the layout.
	g.Expect(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = fs.ModeDir | 0o755
		}
		g.Expect(info.Mode()).To(Equal(want), p)
		return nil
	})).To(Succeed())
}

// checkImage checks what a runtime reads: the manifest, the config and the
// one layer's entries.
func checkImage(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(validate.Image(img)).To(Succeed())
	m, err := img.Manifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.MediaType).To(Equal(types.OCIManifestSchema1))
	g.Expect(m.Config.MediaType).To(Equal(types.OCIConfigJSON))
	g.Expect(m.Layers).To(HaveLen(1))
	g.Expect(m.Layers[0].MediaType).To(Equal(types.OCILayer))

	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.OS).To(Equal("linux"))
	g.Expect(cfg.Architecture).To(Equal(arch))
	g.Expect(cfg.Created.Time.Equal(testCreated)).To(BeTrue(), "created %s", cfg.Created.Time)
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/hello"}))
	g.Expect(cfg.Config.User).To(Equal("65532:65532"))
	g.Expect(cfg.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.version", "v1.2.3-4-gabcdef0"))
	g.Expect(cfg.RootFS.Type).To(Equal("layers"))
	g.Expect(cfg.RootFS.DiffIDs).To(HaveLen(1))
	g.Expect(cfg.History).To(HaveLen(1))

	entries := layerEntries(t, img)
	var names []string
	for _, e := range entries {
		names = append(names, e.hdr.Name)
		g.Expect(e.hdr.ModTime.Equal(testCreated)).To(BeTrue(), "%s: mtime %s", e.hdr.Name, e.hdr.ModTime)
		g.Expect(e.hdr.Uname).To(BeEmpty())
	}
	g.Expect(sort.StringsAreSorted(names)).To(BeTrue(), "entries %v", names)
	g.Expect(names).To(Equal([]string{
		"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"hello", "home/", "home/nonroot/", "root/", "tmp/",
	}))
	byName := map[string]layerEntry{}
	for _, e := range entries {
		byName[e.hdr.Name] = e
	}
	hello := byName["hello"]
	g.Expect(hello.hdr.Typeflag).To(Equal(byte(tar.TypeReg)))
	g.Expect(hello.hdr.FileInfo().Mode()).To(Equal(fs.FileMode(0o755)))
	g.Expect(hello.hdr.Uid).To(Equal(0))
	g.Expect(string(hello.data[:4])).To(Equal("\x7fELF"))
	g.Expect(string(byName["etc/passwd"].data)).To(ContainSubstring("nonroot:x:65532:65532:"))
	g.Expect(string(byName["etc/group"].data)).To(ContainSubstring("nonroot:x:65532:"))
	g.Expect(string(byName["etc/ssl/certs/ca-certificates.crt"].data)).To(HavePrefix("-----BEGIN CERTIFICATE-----"))
	g.Expect(byName["etc/ssl/certs/ca-certificates.crt"].hdr.FileInfo().Mode()).To(Equal(fs.FileMode(0o644)))
	g.Expect(byName["tmp/"].hdr.FileInfo().Mode()).To(Equal(fs.ModeDir | fs.ModeSticky | 0o777))
	home := byName["home/nonroot/"]
	g.Expect([]int{home.hdr.Uid, home.hdr.Gid}).To(Equal([]int{NonRoot, NonRoot}))
	g.Expect(home.hdr.FileInfo().Mode()).To(Equal(fs.ModeDir | 0o700))
	g.Expect(byName["etc/"].hdr.FileInfo().Mode()).To(Equal(fs.ModeDir | 0o755))
}

type layerEntry struct {
	hdr  *tar.Header
	data []byte
}

// layerEntries are the entries of img's last layer, its files'.
func layerEntries(t *testing.T, img v1.Image) []layerEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return entriesOf(t, layers[len(layers)-1])
}

func entriesOf(t *testing.T, l v1.Layer) []layerEntry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var entries []layerEntry
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, layerEntry{hdr: hdr, data: data})
	}
}

// runHello writes the image's entrypoint out of its layer, with the
// layer's mode, and runs it.
func runHello(t *testing.T, img v1.Image) {
	t.Helper()
	g := NewWithT(t)
	var hello *layerEntry
	for _, e := range layerEntries(t, img) {
		if e.hdr.Name == "hello" {
			hello = &e
		}
	}
	g.Expect(hello).NotTo(BeNil())
	bin := filepath.Join(t.TempDir(), "hello")
	g.Expect(os.WriteFile(bin, hello.data, hello.hdr.FileInfo().Mode().Perm())).To(Succeed())
	out, err := exec.Command(bin, "--help").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(string(out)).To(HavePrefix("hello from the image: --help (uid "))
}

// TestReproducible builds the same spec twice into two directories: the
// digests and every file of the two layouts are the same. A different
// creation time gives a different digest.
func TestReproducible(t *testing.T) {
	g := NewWithT(t)
	spec := testSpec(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	da := buildLayout(t, spec, a)
	db := buildLayout(t, spec, b)
	g.Expect(da).To(Equal(db))
	g.Expect(treeSums(t, a)).To(Equal(treeSums(t, b)))

	// Written again over itself: the same, and nothing left over.
	g.Expect(buildLayout(t, spec, a)).To(Equal(da))
	g.Expect(treeSums(t, a)).To(Equal(treeSums(t, b)))
	left, err := filepath.Glob(filepath.Join(filepath.Dir(a), ".*"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())

	spec.Created = spec.Created.Add(time.Second)
	g.Expect(buildLayout(t, spec, filepath.Join(t.TempDir(), "c"))).NotTo(Equal(da))
}

// treeSums maps every file of dir to the SHA-256 of its content.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(data)
		sums[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestDataLayer: Data is a layer of its own below the files', the same
// blob in every platform's image and stored once in the layout.
func TestDataLayer(t *testing.T) {
	g := NewWithT(t)
	spec := testSpec(t)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7 % 251)
	}
	spec.Data = []File{{Path: "usr/share/hello/big.bin", Data: big}, {Path: "usr/share/hello/small.txt", Data: []byte("small\n")}}
	dir := filepath.Join(t.TempDir(), "hello")
	digest := buildLayout(t, spec, dir)

	lp, err := layout.FromPath(dir)
	g.Expect(err).NotTo(HaveOccurred())
	idx, err := lp.ImageIndex()
	g.Expect(err).NotTo(HaveOccurred())
	idx, err = idx.ImageIndex(digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(validate.Index(idx)).To(Succeed())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(2))
	var dataDigests []v1.Hash
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		manifest, err := img.Manifest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(manifest.Layers).To(HaveLen(2))
		g.Expect(manifest.Layers[0].MediaType).To(Equal(types.OCILayer))
		dataDigests = append(dataDigests, manifest.Layers[0].Digest)
		cfg, err := img.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.RootFS.DiffIDs).To(HaveLen(2))
		g.Expect(cfg.History).To(HaveLen(2))

		layers, err := img.Layers()
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		byName := map[string]layerEntry{}
		for _, e := range entriesOf(t, layers[0]) {
			names = append(names, e.hdr.Name)
			byName[e.hdr.Name] = e
			g.Expect(e.hdr.ModTime.Equal(testCreated)).To(BeTrue(), e.hdr.Name)
			g.Expect([]int{e.hdr.Uid, e.hdr.Gid}).To(Equal([]int{0, 0}), e.hdr.Name)
		}
		g.Expect(names).To(Equal([]string{"usr/", "usr/share/", "usr/share/hello/", "usr/share/hello/big.bin", "usr/share/hello/small.txt"}))
		g.Expect(byName["usr/share/hello/big.bin"].data).To(Equal(big))
		g.Expect(byName["usr/share/hello/big.bin"].hdr.FileInfo().Mode()).To(Equal(fs.FileMode(0o644)))
		g.Expect(byName["usr/share/hello/"].hdr.FileInfo().Mode()).To(Equal(fs.ModeDir | 0o755))
		// The platform's files are in the layer above, as without Data.
		checkEntries := map[string]bool{}
		for _, e := range layerEntries(t, img) {
			checkEntries[e.hdr.Name] = true
		}
		g.Expect(checkEntries).To(HaveKey("hello"))
		g.Expect(checkEntries).NotTo(HaveKey("usr/"))
		if m.Platform.Architecture == runtime.GOARCH && runtime.GOOS == "linux" {
			runHello(t, img)
		}
	}
	g.Expect(dataDigests[0]).To(Equal(dataDigests[1]), "one data layer for every platform")
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	g.Expect(err).NotTo(HaveOccurred())
	// index, 2 × (manifest, config, files layer), one data layer
	g.Expect(blobs).To(HaveLen(1 + 2*3 + 1))

	// Reproducible with it too.
	g.Expect(buildLayout(t, spec, filepath.Join(t.TempDir(), "again"))).To(Equal(digest))
}

func TestBuildRefuses(t *testing.T) {
	platform := Platform{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}}
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{name: "no tag", spec: Spec{Reference: "registry.example/hello", Platforms: []Platform{platform}}, want: `image reference "registry.example/hello"`},
		{name: "no platform", spec: Spec{Reference: testRef}, want: "at least one platform"},
		{name: "outside /", spec: Spec{Reference: testRef, Files: []File{{Path: "../etc/passwd"}}, Platforms: []Platform{platform}}, want: "not a path under /"},
		{name: "twice", spec: Spec{Reference: testRef, Files: []File{{Path: "a"}, {Path: "/a"}}, Platforms: []Platform{platform}}, want: "given twice"},
		{name: "under a file", spec: Spec{Reference: testRef, Files: []File{{Path: "a"}, {Path: "a/b"}}, Platforms: []Platform{platform}}, want: "a is not a directory"},
		{name: "data twice", spec: Spec{Reference: testRef, Data: []File{{Path: "a"}, {Path: "a"}}, Platforms: []Platform{platform}}, want: "given twice"},
		{name: "symlink", spec: Spec{Reference: testRef, Files: []File{{Path: "a", Mode: fs.ModeSymlink}}, Platforms: []Platform{platform}}, want: "only files and directories"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Build(tt.spec)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestWriteRefusesUntagged(t *testing.T) {
	g := NewWithT(t)
	idx, err := Build(Spec{Reference: testRef, Platforms: []Platform{{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Write(filepath.Join(t.TempDir(), "x"), "registry.example/hello", idx)
	g.Expect(err).To(MatchError(ContainSubstring("image reference")))
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/ociimage"
	"github.com/metalshift/metalshift/manager"
)

// containerVersion changes when the container images change for the same
// inputs.
const containerVersion = "2"

// The manager's container image (manager.ImageRepository, tagged with
// -version): what a production hub's Deployments run.
const (
	// managerPackage is built, static, into the image as /manager.
	managerPackage = "github.com/metalshift/metalshift/cmd/manager"
	// sourceURL is the images' org.opencontainers.image.source.
	sourceURL = "https://github.com/metalshift/metalshift"
)

// liveImageFiles are the live images, as imageservice.LoadImages reads
// them from --live-image-dir; images.json, which records a build's time,
// stays out.
var liveImageFiles = []string{imageservice.LiveISOFile, imageservice.LiveKernelFile, imageservice.LiveInitrdFile}

// imageOptions say what the container images are made of besides the
// code.
type imageOptions struct {
	// version tags the images; revision is the commit they are built
	// from (label only).
	version, revision string
	// created is every image's creation time and every file's mtime.
	created time.Time
	// platforms are "linux/<GOARCH>"es.
	platforms []string
	// caBundle is the PEM file copied into the images as
	// /etc/ssl/certs/ca-certificates.crt.
	caBundle string
	// live is the directory of the live images (imageservice.LiveISOFile,
	// LiveKernelFile, LiveInitrdFile), which the manager's image holds in
	// manager.ImageLiveDir.
	live string
}

// ImageStamp is <out>/oci/<name>.json: what the layout next to it was built
// from, and its reference and digest.
type ImageStamp struct {
	Inputs    string `json:"inputs"`
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
}

// resolveImageOptions fills what the flags left empty: the creation time
// from SOURCE_DATE_EPOCH, else the commit's time, the revision from HEAD.
// The version is required: the Makefile's VERSION, which `make
// clusterctl-repo` names the providers and their image with too.
func resolveImageOptions(o *imageOptions) error {
	if o.version == "" {
		return errors.New("the image version is required (-version; make images passes VERSION)")
	}
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: not seconds since 1970", epoch)
		}
		o.created = time.Unix(sec, 0).UTC()
	} else {
		ct, err := git("log", "-1", "--format=%ct")
		if err != nil {
			return fmt.Errorf("the image creation time: %w (set SOURCE_DATE_EPOCH)", err)
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return fmt.Errorf("git log: commit time %q", ct)
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	o.revision, _ = git("rev-parse", "HEAD")
	return nil
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// managerImage builds the manager's image into <out>/oci/manager, an OCI
// image layout tagged manager.ImageRepository:<version>, unless its stamp
// says it was built from the same inputs: the manager, static (CGO off),
// per platform, at /manager, run as ociimage.NonRoot, over ociimage.Base,
// over a layer of the live images in manager.ImageLiveDir.
func (b *builder) managerImage(o imageOptions, force bool) error {
	bins, err := b.managerBinaries(o.platforms)
	if err != nil {
		return err
	}
	return b.writeManagerImage(o, bins, force)
}

// managerBinaries builds the manager for each platform into the cache and
// returns their paths, by platform.
func (b *builder) managerBinaries(platforms []string) (map[string]string, error) {
	bins := map[string]string{}
	for _, p := range platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil || platform.OS != "linux" || platform.Architecture == "" || platform.Variant != "" {
			return nil, fmt.Errorf("platform %q: want linux/<GOARCH>, such as linux/amd64", p)
		}
		bin := filepath.Join(b.cache, "manager-linux-"+platform.Architecture)
		if err := goBuild(bin, managerPackage, platform.Architecture, "-s", "-w"); err != nil {
			return nil, err
		}
		bins[p] = bin
	}
	return bins, nil
}

// writeManagerImage writes the image of the manager binaries given, unless
// up to date.
func (b *builder) writeManagerImage(o imageOptions, bins map[string]string, force bool) error {
	start := time.Now()
	ref := manager.ImageRepository + ":" + o.version
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return fmt.Errorf("the CA certificates for the images: %w (install Debian's ca-certificates, or give -ca-certs)", err)
	}
	inputs := []string{containerVersion, ref, o.revision, o.created.Format(time.RFC3339), o.caBundle}
	var live []ociimage.File
	for _, name := range liveImageFiles {
		file := filepath.Join(o.live, name)
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("the live images for the manager's image: %w", err)
		}
		live = append(live, ociimage.File{Path: path.Join(manager.ImageLiveDir, name), Data: data})
		inputs = append(inputs, file)
	}
	spec := ociimage.Spec{
		Reference: ref,
		Created:   o.created,
		Config: v1.Config{
			Entrypoint: []string{"/manager"},
			User:       fmt.Sprintf("%d:%d", ociimage.NonRoot, ociimage.NonRoot),
			WorkingDir: "/",
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels: map[string]string{
				"org.opencontainers.image.title":       "metalshift manager",
				"org.opencontainers.image.description": "The hub's controllers: Cluster API core and every metalshift component",
				"org.opencontainers.image.source":      sourceURL,
				"org.opencontainers.image.version":     o.version,
				"org.opencontainers.image.revision":    o.revision,
				"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
			},
		},
		Files: ociimage.Base(ca),
		Data:  live,
	}
	for _, p := range o.platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(bins[p])
		if err != nil {
			return fmt.Errorf("the manager for %s: %w", p, err)
		}
		inputs = append(inputs, p, bins[p])
		spec.Platforms = append(spec.Platforms, ociimage.Platform{
			Platform: *platform,
			Files:    []ociimage.File{{Path: "manager", Mode: 0o755, Data: data}},
		})
	}
	sum, err := digest(inputs...)
	if err != nil {
		return err
	}
	dir := filepath.Join(b.out, "oci", "manager")
	stampPath := dir + ".json"
	if !force {
		var old ImageStamp
		if data, err := os.ReadFile(stampPath); err == nil && json.Unmarshal(data, &old) == nil && old.Inputs == sum {
			if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
				b.logf("%s up to date in %s (%s)", ref, dir, old.Digest)
				return nil
			}
		}
	}
	idx, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return err
	}
	d, err := ociimage.Write(dir, ref, idx)
	if err != nil {
		return err
	}
	data, _ := json.MarshalIndent(ImageStamp{Inputs: sum, Reference: ref, Digest: d.String()}, "", "  ")
	if err := writeFile(stampPath, append(data, '\n')); err != nil {
		return err
	}
	b.logf("built %s (%s) in %s in %.1fs", ref, strings.Join(o.platforms, ", "), dir, time.Since(start).Seconds())
	b.logf("  digest %s", d)
	return nil
}

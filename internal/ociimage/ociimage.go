package ociimage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of the image-layout's index.json entry.
const (
	// RefNameAnnotation is the OCI image-layout's name of the entry: the
	// tag ("v0.1.0"), as skopeo's oci:DIR:TAG and the OCI spec read it.
	RefNameAnnotation = "org.opencontainers.image.ref.name"
	// ImageNameAnnotation is the full reference, as containerd (`ctr
	// images import`) names what it imports.
	ImageNameAnnotation = "io.containerd.image.name"
)

// Spec describes an image: one root file system per platform, one config.
type Spec struct {
	// Reference names the image, with a tag: "ghcr.io/metalshift/manager:v0.1.0".
	Reference string
	// Created is the image's creation time, and every file's mtime: a
	// commit's time (SOURCE_DATE_EPOCH) keeps builds reproducible.
	Created time.Time
	// Config is the runtime configuration (entrypoint, user, labels ...).
	Config v1.Config
	// Files are in every platform's root file system (Base, for one).
	Files []File
	// Platforms are the image's platforms, each with its own files
	// (its binaries).
	Platforms []Platform
	// Data are files in a layer of their own, below the other one and the
	// same in every platform's image, so stored once in a layout or a
	// registry: large files that are not the platforms' programs. None
	// means no such layer.
	Data []File
}

// Platform is one platform of an image and the files only it has.
type Platform struct {
	v1.Platform
	Files []File
}

// Build returns spec's image index: one image per platform, each with an
// OCI config and a gzip-compressed layer of its files (Files and the
// platform's), over the layer of Data when there is any; all OCI media
// types.
func Build(spec Spec) (v1.ImageIndex, error) {
	if _, err := name.NewTag(spec.Reference, name.StrictValidation); err != nil {
		return nil, fmt.Errorf("image reference %q: %w", spec.Reference, err)
	}
	if len(spec.Platforms) == 0 {
		return nil, errors.New("an image needs at least one platform")
	}
	var data v1.Layer
	if len(spec.Data) > 0 {
		var err error
		if data, err = layer(spec.Data, spec.Created); err != nil {
			return nil, fmt.Errorf("the data layer: %w", err)
		}
	}
	var idx v1.ImageIndex = empty.Index
	for _, p := range spec.Platforms {
		img, err := platformImage(spec, p, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.String(), err)
		}
		platform := p.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return idx, nil
}

// plainImage is an image whose descriptor in an index has no artifactType:
// go-containerregistry would set it to the config's media type, which
// marks artifacts, not images.
type plainImage struct{ v1.Image }

// ArtifactType is empty: an image is no artifact.
func (plainImage) ArtifactType() (string, error) { return "", nil }

// layer is files as a gzip-compressed OCI layer, held in memory.
func layer(files []File, mtime time.Time) (v1.Layer, error) {
	raw, err := layerTar(files, mtime)
	if err != nil {
		return nil, err
	}
	gz, err := gzipped(raw)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// platformImage is p's image: the data layer, if not nil, then the layer
// of spec's and p's files.
func platformImage(spec Spec, p Platform, data v1.Layer) (v1.Image, error) {
	files, err := layer(append(append([]File(nil), spec.Files...), p.Files...), spec.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: spec.Created.UTC().Truncate(time.Second)}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		OSVersion:    p.OSVersion,
		Created:      created,
		Config:       spec.Config,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	var layers []mutate.Addendum
	if data != nil {
		layers = append(layers, mutate.Addendum{
			Layer: data, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: "metalshift ociimage", Comment: spec.Reference + " data"},
		})
	}
	layers = append(layers, mutate.Addendum{
		Layer: files, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "metalshift ociimage", Comment: spec.Reference},
	})
	return mutate.Append(img, layers...)
}

// Write replaces dir with an OCI image layout holding idx, named ref in
// index.json (RefNameAnnotation: its tag; ImageNameAnnotation: the whole
// reference), and returns idx's digest. The layout is written next to dir
// and renamed into place: a failed write leaves the old one.
func Write(dir, ref string, idx v1.ImageIndex) (v1.Hash, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			RefNameAnnotation:   tag.TagStr(),
			ImageNameAnnotation: tag.Name(),
		}},
	})
	tmp := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return v1.Hash{}, err
	}
	if _, err := layout.Write(tmp, top); err != nil {
		_ = os.RemoveAll(tmp)
		return v1.Hash{}, fmt.Errorf("writing the image layout: %w", err)
	}
	if err := readable(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	return digest, os.Rename(tmp, dir)
}

// readable sets the modes of a layout's files to 0644 and of its
// directories to 0755: go-containerregistry leaves some blobs 0600 (and
// index.json executable), which another user's tools could not read.
func readable(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close() //nolint:errcheck // closing a directory opened to read
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return root.Chmod(p, mode)
	})
}

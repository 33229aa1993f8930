// Package ociimage writes container images without a container runtime:
// a root file system given as files (no base image is pulled), packed into
// one reproducible layer per platform, with an OCI image config, gathered
// in an image index and written as an OCI image layout directory, with
// go-containerregistry.
//
// The same inputs give the same bytes, so the same digest: entries are
// sorted, every time stamp is the image's creation time, owners are
// numeric and compression is deterministic.
//
// It reads no registry and writes to none; pushing a layout is the user's
// step (docs/development.md). It knows nothing of metalshift's binaries:
// hack/images says what goes into each image.
package ociimage

package installer

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/internal/manifest"
)

// FieldOwner is the installer's server-side-apply field manager.
const FieldOwner = "metalshift-installer"

// Apply applies <dir>/cluster-api/*.yaml and the wrapped manifests to the
// hub with server-side apply, in file order.
func Apply(ctx context.Context, c client.Client, dir, cluster string, out io.Writer) error {
	objs, err := readObjects(filepath.Join(dir, ClusterAPIDir))
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("%s has no objects: run `metalshift create manifests --dir %s` first", filepath.Join(dir, ClusterAPIDir), dir)
	}
	wrapped, err := WrapManifests(dir, cluster)
	if err != nil {
		return err
	}
	us := make([]*unstructured.Unstructured, 0, len(wrapped))
	for _, s := range wrapped {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		us = append(us, u)
	}
	// After the namespace, before the control plane reads them.
	objs = slices.Insert(objs, 1, us...)
	for _, u := range objs {
		if err := applyOne(ctx, c, u); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	fmt.Fprintf(out, "Applied %d objects (%d wrapped manifests) to the hub in namespace %s\n", len(objs), len(wrapped), cluster)
	return nil
}

// applyOne applies u, retrying briefly while the API is not ready for it
// (a CRD just installed, a webhook starting).
func applyOne(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	var err error
	for range 20 {
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
		if err == nil || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}

func readObjects(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := manifest.DecodeFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

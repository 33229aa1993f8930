package installer

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Destroy deletes the Cluster (Cluster API tears down workers, then the
// control plane, then the infrastructure; every host deprovisions and
// becomes available), then the namespace with the hosts and Secrets.
func Destroy(ctx context.Context, c client.Client, name string, out io.Writer) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%6s  %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: name}}
	if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Cluster %s: %w", name, err)
	}
	say("Deleting Cluster %s", name)
	last := ""
	if err := poll(ctx, func() (bool, error) {
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace(name)); err != nil {
			return false, err
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if msg := fmt.Sprintf("%d Machines left", len(machines.Items)); msg != last {
			say("%s", msg)
			last = msg
		}
		return false, err
	}); err != nil {
		return err
	}
	say("Cluster %s deleted; waiting for its hosts to deprovision", name)
	if err := poll(ctx, func() (bool, error) {
		hosts := &metal3v1.BareMetalHostList{}
		if err := c.List(ctx, hosts, client.InNamespace(name)); err != nil {
			return false, err
		}
		busy := 0
		for _, h := range hosts.Items {
			if h.Spec.ConsumerRef != nil || (h.Status.Provisioning.State != metal3v1.StateAvailable && h.Status.ErrorMessage == "") {
				busy++
			}
		}
		if len(hosts.Items) == 0 {
			return true, nil // a platform without hosts (Equinix Metal)
		}
		if msg := fmt.Sprintf("%d of %d hosts available", len(hosts.Items)-busy, len(hosts.Items)); msg != last {
			say("%s", msg)
			last = msg
		}
		return busy == 0, nil
	}); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	say("Deleting namespace %s (hosts, BMC Secrets, install-config and install state)", name)
	if err := poll(ctx, func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	say("Destroyed cluster %s; nothing of it is left on the hub", name)
	return nil
}

func poll(ctx context.Context, f func() (bool, error)) error {
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Gather writes a gzipped tarball of the cluster's hub objects (Secrets
// listed without their data), its events, and the files of logDir.
func Gather(ctx context.Context, c client.Client, name, logDir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	add := func(n string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	lists := map[string]client.ObjectList{
		"clusters": &clusterv1.ClusterList{}, "machines": &clusterv1.MachineList{}, "machinesets": &clusterv1.MachineSetList{},
		"machinedeployments": &clusterv1.MachineDeploymentList{}, "openshiftcontrolplanes": &controlplanev1.OpenShiftControlPlaneList{},
		"openshiftconfigs": &bootstrapv1.OpenShiftConfigList{}, "metalclusters": &infrav1.MetalClusterList{},
		"metalmachines": &infrav1.MetalMachineList{}, "baremetalhosts": &metal3v1.BareMetalHostList{}, "events": &corev1.EventList{},
		"secrets": &corev1.SecretList{},
	}
	for kind, l := range lists {
		if err := c.List(ctx, l, client.InNamespace(name)); err != nil {
			if err := add("hub/"+kind+".error", []byte(err.Error())); err != nil {
				return err
			}
			continue
		}
		if sl, ok := l.(*corev1.SecretList); ok {
			for i := range sl.Items {
				sl.Items[i].Data, sl.Items[i].StringData = nil, nil // names and metadata only: never secrets
			}
		}
		data, err := yaml.Marshal(l)
		if err != nil {
			return err
		}
		if err := add("hub/"+kind+".yaml", data); err != nil {
			return err
		}
	}
	if logDir != "" {
		logs, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
		for _, l := range logs {
			data, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			if err := add("logs/"+filepath.Base(l), data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

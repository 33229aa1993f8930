package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/installer"
	"github.com/metalshift/metalshift/internal/manifest"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/manager"
)

// installOptions are the flags every installer command shares.
type installOptions struct {
	dir        string
	kubeconfig string
	timeout    time.Duration
}

func (o *installOptions) flags(cmd *cobra.Command, hub bool) {
	cmd.Flags().StringVar(&o.dir, "dir", ".", "Install directory (install-config.yaml, manifests, auth, the embedded hub)")
	if hub {
		cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "Hub to use; default: the embedded hub in <dir>/hub")
	}
}

func newCreateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Create an install-config, the manifests, or the cluster (the openshift-install workflow)"}
	ic := &installConfigOptions{}
	icCmd := &cobra.Command{
		Use:   "install-config",
		Short: "Write <dir>/install-config.yaml for the baremetal platform",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return ic.run(cmd.OutOrStdout()) },
	}
	ic.flags(icCmd)

	mo := &installOptions{}
	manifests := &cobra.Command{
		Use:   "manifests",
		Short: "Write the hub objects (cluster-api/), default manifests (manifests/, openshift/) and the admin kubeconfig (auth/)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := installer.CreateManifests(cmd.Context(), mo.dir, cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote the manifests to %s; edit them, then run `metalshift create cluster --dir %s`\n",
				filepath.Join(mo.dir, installer.ClusterAPIDir), mo.dir)
			return nil
		},
	}
	mo.flags(manifests, false)

	co := &installOptions{}
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Apply the manifests to the hub (starting the embedded one when no --kubeconfig is given) and wait until the cluster is installed",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return co.createCluster(cmd.Context(), cmd.OutOrStdout()) },
	}
	co.flags(cluster, true)
	cluster.Flags().DurationVar(&co.timeout, "timeout", 30*time.Minute, "How long to wait for the installation")
	cmd.AddCommand(icCmd, manifests, cluster)
	return cmd
}

func newWaitForCommand() *cobra.Command {
	o := &installOptions{}
	cmd := &cobra.Command{
		Use:       "wait-for bootstrap-complete|install-complete",
		Short:     "Report progress until the bootstrap is complete or the cluster is installed",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{string(installer.BootstrapComplete), string(installer.InstallComplete)},
		RunE: func(cmd *cobra.Command, args []string) error {
			m := installer.Milestone(args[0])
			if m != installer.BootstrapComplete && m != installer.InstallComplete {
				return fmt.Errorf("wait-for %q: want bootstrap-complete or install-complete", args[0])
			}
			name, c, err := o.connect(true)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			return installer.Wait(ctx, c, name, m, cmd.OutOrStdout())
		},
	}
	o.flags(cmd, true)
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Minute, "How long to wait")
	return cmd
}

func newDestroyCommand() *cobra.Command {
	o := &installOptions{}
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Delete the cluster from the hub: every host deprovisions and returns to available (on Equinix Metal: every device and elastic IP is deleted), then its namespace goes; the embedded hub stops",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, c, err := o.connect(false)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			if err := installer.Destroy(ctx, c, name, cmd.OutOrStdout()); err != nil {
				return err
			}
			if ic, _, err := installer.LoadInstallConfig(o.dir); err == nil && ic.Platform.EquinixMetal != nil {
				if err := installer.DestroyEquinix(ctx, ic, cmd.OutOrStdout()); err != nil {
					return err
				}
			}
			if o.kubeconfig == "" {
				if err := localcp.Down(ctx, o.hubDir(), time.Minute); err != nil && !errors.Is(err, localcp.ErrNotRunning) {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Stopped the embedded hub in %s\n", o.hubDir())
			}
			return nil
		},
	}
	o.flags(cluster, true)
	cluster.Flags().DurationVar(&o.timeout, "timeout", 20*time.Minute, "How long to wait")
	cmd := &cobra.Command{Use: "destroy", Short: "Destroy a cluster"}
	cmd.AddCommand(cluster)
	return cmd
}

func newGatherCommand() *cobra.Command {
	o := &installOptions{}
	cmd := &cobra.Command{
		Use:   "gather",
		Short: "Write a tarball of the cluster's hub objects, events and controller logs to <dir>",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, c, err := o.connect(false)
			if err != nil {
				return err
			}
			logDir := ""
			if o.kubeconfig == "" {
				logDir = filepath.Join(o.hubDir(), "logs")
			}
			path := filepath.Join(o.dir, "log-bundle-"+time.Now().Format("20060102150405")+".tar.gz")
			if err := installer.Gather(cmd.Context(), c, name, logDir, path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s\n", path)
			return nil
		},
	}
	o.flags(cmd, true)
	return cmd
}

// connect reads the cluster's name from the install-config (validating it
// first when asked) and returns a client of the hub.
func (o *installOptions) connect(validate bool) (string, client.Client, error) {
	var ic *installconfig.InstallConfig
	var err error
	if validate {
		ic, _, err = installer.LoadInstallConfig(o.dir)
	} else {
		ic, err = installconfig.ParseFile(filepath.Join(o.dir, installer.InstallConfigFile))
	}
	if err != nil {
		return "", nil, err
	}
	c, err := o.hubClient()
	return ic.Metadata.Name, c, err
}

func (o *installOptions) hubDir() string { return filepath.Join(absDir(o.dir), "hub") }

func (o *installOptions) hubKubeconfig() string {
	if o.kubeconfig != "" {
		return o.kubeconfig
	}
	return localcp.KubeconfigPath(o.hubDir())
}

func (o *installOptions) hubClient() (client.Client, error) {
	if o.kubeconfig == "" {
		if s, err := localcp.GetStatus(o.hubDir()); err != nil || !s.Running {
			return nil, fmt.Errorf("no embedded hub runs in %s: `metalshift create cluster --dir %s` starts it, or pass --kubeconfig", o.hubDir(), o.dir)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.hubKubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme, err := manager.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

func (o *installOptions) createCluster(ctx context.Context, out io.Writer) error {
	start := time.Now()
	ic, _, err := installer.LoadInstallConfig(o.dir)
	if err != nil {
		return err // nothing applied
	}
	if _, err := os.Stat(filepath.Join(o.dir, installer.ClusterAPIDir)); os.IsNotExist(err) {
		if err := installer.CreateManifests(ctx, o.dir, out); err != nil {
			return err
		}
		fmt.Fprintf(out, "Wrote the manifests to %s\n", filepath.Join(o.dir, installer.ClusterAPIDir))
	}
	if o.kubeconfig == "" {
		if err := o.startHub(ctx, out); err != nil {
			return err
		}
	}
	c, err := o.hubClient()
	if err != nil {
		return err
	}
	if err := installer.Apply(ctx, c, o.dir, ic.Metadata.Name, out); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := installer.Wait(ctx, c, ic.Metadata.Name, installer.InstallComplete, out); err != nil {
		return err
	}
	kc := filepath.Join(absDir(o.dir), installer.AuthDir, "kubeconfig")
	fmt.Fprintf(out, "Install complete in %s.\n", time.Since(start).Round(time.Second))
	fmt.Fprintf(out, "To access the cluster:  export KUBECONFIG=%s\n", kc)
	fmt.Fprintf(out, "The hub:               kubectl --kubeconfig %s -n %s get machines\n", o.hubKubeconfig(), ic.Metadata.Name)
	return nil
}

// startHub starts the embedded hub in <dir>/hub in the background, where it
// keeps running for wait-for, scaling and destroy; its controller logs go to
// <dir>/hub/logs.
func (o *installOptions) startHub(ctx context.Context, out io.Writer) error {
	dir := o.hubDir()
	if s, err := localcp.GetStatus(dir); err == nil && s.Running {
		fmt.Fprintf(out, "Using the embedded hub in %s\n", dir)
		_, err := localcp.WaitReady(ctx, dir, 3*time.Minute)
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "hub.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(exe, "hub", "up", "--dir", dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the embedded hub: %w", err)
	}
	_ = cmd.Process.Release()
	fmt.Fprintf(out, "Starting the embedded hub in %s (log: %s)\n", dir, logPath)
	s, err := localcp.WaitReady(ctx, dir, 3*time.Minute)
	if err != nil {
		data, _ := os.ReadFile(logPath)
		return fmt.Errorf("the embedded hub did not become ready: %w\n%s", err, data)
	}
	fmt.Fprintf(out, "The hub is ready: kubectl --kubeconfig %s get clusters -A\n", localcp.KubeconfigPath(dir))
	if s.State.Ports.Console != 0 {
		fmt.Fprintf(out, "Its web console: https://127.0.0.1:%d (certificate from the hub CA %s), sign in with the token of\n", s.State.Ports.Console, localcp.CAPath(dir))
		fmt.Fprintf(out, "  kubectl --kubeconfig %s create token %s -n %s --duration 8h\n", localcp.KubeconfigPath(dir), consoleAdmin, consoleAdminNamespace)
	}
	return nil
}

// emptyPullSecret is enough for a simulated cluster; a real one comes from console.redhat.com.
const emptyPullSecret = `{"auths":{}}` //nolint:gosec // no credential in it

// installConfigOptions are the answers openshift-install asks for.
type installConfigOptions struct {
	dir, name, baseDomain, apiVIP, hostsFrom, imageURL, imageChecksum, version string
	masters, workers                                                           int32
}

func (o *installConfigOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", ".", "Install directory")
	f.StringVar(&o.name, "name", "demo", "Cluster name")
	f.StringVar(&o.baseDomain, "base-domain", "example.com", "Base domain")
	f.StringVar(&o.apiVIP, "api-vip", "", "API VIP (required)")
	f.Int32Var(&o.masters, "masters", 3, "Control-plane replicas")
	f.Int32Var(&o.workers, "workers", 2, "Worker replicas")
	f.StringVar(&o.hostsFrom, "hosts-from", "", "YAML with BareMetalHosts and their BMC Secrets (as `metalshift sim bmc --manifests` writes) for platform.baremetal.hosts")
	f.StringVar(&o.imageURL, "os-image-url", "", "OS image written to every host")
	f.StringVar(&o.imageChecksum, "os-image-checksum", "", "SHA-256 of the OS image")
	f.StringVar(&o.version, "version", installconfig.DefaultVersion, "OpenShift release")
}

func (o *installConfigOptions) run(out io.Writer) error {
	ic := &installconfig.InstallConfig{
		APIVersion: "v1", BaseDomain: o.baseDomain, Metadata: installconfig.Metadata{Name: o.name},
		ControlPlane: installconfig.MachinePool{Name: installconfig.RoleMaster, Replicas: ptr.To(o.masters)},
		Compute:      []installconfig.MachinePool{{Name: installconfig.RoleWorker, Replicas: ptr.To(o.workers)}},
		Platform:     installconfig.Platform{BareMetal: &installconfig.BareMetal{APIVIPs: []string{o.apiVIP}}},
		PullSecret:   emptyPullSecret,
		Metalshift: &installconfig.Metalshift{Version: o.version,
			OSImage: installconfig.OSImage{URL: o.imageURL, Checksum: o.imageChecksum, ChecksumType: "sha256"}},
	}
	if o.hostsFrom != "" {
		hosts, err := hostsFromManifests(o.hostsFrom)
		if err != nil {
			return err
		}
		ic.Platform.BareMetal.Hosts = hosts
	}
	if errs := ic.Validate(); len(errs) > 0 {
		return &installer.InvalidError{Errs: errs}
	}
	data, err := yaml.Marshal(ic)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(o.dir, installer.InstallConfigFile)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "Wrote %s (%d hosts)\n", path, len(ic.Platform.BareMetal.Hosts))
	return nil
}

// hostsFromManifests turns BareMetalHosts and their Secrets into install-config hosts.
func hostsFromManifests(path string) ([]installconfig.Host, error) {
	objs, err := manifest.DecodeFile(path)
	if err != nil {
		return nil, err
	}
	secrets := map[string]map[string]string{}
	var bmhs []metal3v1.BareMetalHost
	for _, u := range objs {
		switch u.GetKind() {
		case "Secret":
			s := corev1.Secret{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				return nil, err
			}
			secrets[s.Name] = s.StringData
		case "BareMetalHost":
			h := metal3v1.BareMetalHost{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &h); err != nil {
				return nil, err
			}
			bmhs = append(bmhs, h)
		}
	}
	hosts := make([]installconfig.Host, 0, len(bmhs))
	for _, h := range bmhs {
		s := secrets[h.Spec.BMC.CredentialsName]
		hosts = append(hosts, installconfig.Host{
			Name: h.Name, BootMACAddress: h.Spec.BootMACAddress, BootMode: string(h.Spec.BootMode),
			BMC: installconfig.BMC{Address: h.Spec.BMC.Address, Username: s["username"], Password: s["password"]},
		})
	}
	return hosts, nil
}

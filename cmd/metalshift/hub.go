package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/manager"
)

type hubOptions struct {
	dir         string
	binDir      string
	controllers bool
	// hostsAddr is where hosts reach the hub's deploy server and agent
	// service.
	hostsAddr string
}

func newHubCommand() *cobra.Command {
	o := &hubOptions{}
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run a hub (etcd, kube-apiserver, Cluster API and metalshift controllers) on this machine",
	}
	cmd.PersistentFlags().StringVar(&o.dir, "dir", localcp.DefaultDir(), "Directory holding the hub's data, certificates, kubeconfig and logs")
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the hub in the foreground (resuming with the data in --dir); Ctrl-C stops it",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.up(cmd.Context(), cmd.OutOrStdout()) },
	}
	up.Flags().BoolVar(&o.controllers, "controllers", true, "Run the manager (every controller, the webhooks, the deploy and ignition servers, the agent service) in the hub; with false, run cmd/manager against it (the hub prints how)")
	up.Flags().StringVar(&o.hostsAddr, "hosts-address", "127.0.0.1", "Address at which hosts reach the hub's deploy server and agent service (10.0.2.2 for the VMs of the QEMU lab, `sim bmc --backend qemu`)")
	up.Flags().StringVar(&o.binDir, "bin-dir", "", "Directory holding etcd, kube-apiserver and kube-controller-manager (default: search $METALSHIFT_BIN_DIR, $KUBEBUILDER_ASSETS, next to metalshift, ./bin, $PATH)")

	var downTimeout time.Duration
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop the hub running in --dir, keeping its data",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := localcp.Down(cmd.Context(), o.dir, downTimeout)
			if errors.Is(err, localcp.ErrNotRunning) {
				fmt.Fprintf(cmd.OutOrStdout(), "No hub is running in %s\n", o.dir)
				return nil
			}
			if err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "Stopped the hub in %s\n", o.dir)
			}
			return err
		},
	}
	down.Flags().DurationVar(&downTimeout, "timeout", time.Minute, "How long to wait for an orderly stop before killing the hub")

	var wait time.Duration
	status := &cobra.Command{
		Use:   "status",
		Short: "Show whether the hub in --dir runs and how to reach it; exits 1 when it is not ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.status(cmd.Context(), cmd.OutOrStdout(), wait)
		},
	}
	status.Flags().DurationVar(&wait, "wait", 0, "Wait up to this long for the hub to become ready")

	var raw bool
	kubeconfig := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of the hub's admin kubeconfig (or, with --raw, its content)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := localcp.KubeconfigPath(absDir(o.dir))
			if !raw {
				fmt.Fprintln(cmd.OutOrStdout(), path)
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("no kubeconfig yet: start the hub with `metalshift hub up --dir %s`: %w", o.dir, err)
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	kubeconfig.Flags().BoolVar(&raw, "raw", false, "Print the kubeconfig itself")

	var backupOut string
	backup := &cobra.Command{
		Use:   "backup",
		Short: "Write a backup of the hub in --dir to --out: an etcd snapshot, the hub's keys and certificates (every secret of the hub; written 0600)",
		Long: `Write a backup of the hub in --dir to --out, a gzipped tar archive (mode 0600):
an etcd snapshot taken through etcd's client API while the hub runs (a copy of
its database when it is stopped), the hub's CA, keys and certificates, and its
ports. The archive holds every Secret of the hub and the keys that sign its
tokens: keep it as secret as the hub itself. ` + "`metalshift hub restore`" + ` brings it back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if backupOut == "" {
				return errors.New("--out is required")
			}
			m, err := localcp.Backup(cmd.Context(), o.dir, backupOut)
			if err != nil {
				return err
			}
			how := "etcd snapshot (version " + m.SnapshotVersion + ")"
			if m.Copied {
				how = "copy of the stopped hub's etcd database"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote a backup of the hub in %s to %s: %s, keys and certificates.\n", m.Dir, backupOut, how)
			fmt.Fprintln(cmd.OutOrStdout(), "It holds every secret of the hub: keep it private (mode 0600, encrypted at rest).")
			return nil
		},
	}
	backup.Flags().StringVar(&backupOut, "out", "", "File to write the backup to (replaced if it exists)")

	var restoreFrom string
	restore := &cobra.Command{
		Use:   "restore",
		Short: "Make --dir, a new directory, a hub restored from the backup --from; then `hub up --dir` resumes it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if restoreFrom == "" {
				return errors.New("--from is required")
			}
			m, err := localcp.Restore(restoreFrom, o.dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Restored the hub of %s (backup of %s) into %s\n", m.Dir, m.Created.Format(time.RFC3339), absDir(o.dir))
			fmt.Fprintf(cmd.OutOrStdout(), "Start it with `metalshift hub up --dir %s`\n", absDir(o.dir))
			return nil
		},
	}
	restore.Flags().StringVar(&restoreFrom, "from", "", "Backup file written by `metalshift hub backup`")

	cmd.AddCommand(up, down, status, kubeconfig, backup, restore)
	return cmd
}

func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// up runs the hub until SIGINT or SIGTERM, or until a part of it fails.
func (o *hubOptions) up(ctx context.Context, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	fmt.Fprintf(out, "Starting the hub in %s\n", absDir(o.dir))
	crds, err := component.CRDs(manager.Components())
	if err != nil {
		return err
	}
	hub, err := localcp.Start(ctx, localcp.Options{Dir: o.dir, BinDir: o.binDir, Progress: prefixed(out, "  "), CRDs: crds,
		HostAddresses: []string{o.hostsAddr}}) // in the certificates of the servers hosts reach
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the hub")
		hub.Stop()
		fmt.Fprintln(out, "Stopped")
	}()
	mgrCtx, cancelMgr := context.WithCancel(ctx)
	defer cancelMgr()
	var mgrDone <-chan error // stays nil without controllers
	if o.controllers {
		logFile, err := os.OpenFile(filepath.Join(hub.LogDir(), "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer logFile.Close()
		setLogger(zap.New(zap.WriteTo(logFile)))
		if mgrDone, err = startManager(mgrCtx, hub, o.hostsAddr); err != nil {
			return err
		}
	} else if err := prepareForExternalManager(ctx, hub); err != nil {
		return err
	}
	if err := ensureConsoleAdmin(ctx, hub); err != nil {
		return err
	}
	if err := hub.MarkReady(); err != nil {
		return err
	}
	printReady(out, hub, time.Since(start), o.controllers, o.hostsAddr)

	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "Received a stop signal")
	case err = <-hub.Exited():
		err = fmt.Errorf("the hub's control plane failed: %w", err)
	case err = <-mgrDone:
		err = fmt.Errorf("the manager stopped: %w", err)
	}
	cancelMgr()
	if mgrDone == nil {
		return err
	}
	select {
	case stopErr := <-mgrDone:
		if err == nil {
			err = stopErr
		}
	case <-time.After(30 * time.Second):
	}
	return err
}

// startManager starts the hub manager with every component, from the
// command line an external manager would get (managerArgs), waits for its
// webhook server and registers the webhooks with the kube-apiserver.
func startManager(ctx context.Context, hub *localcp.Hub, hostsAddr string) (<-chan error, error) {
	if _, err := hub.SigningKey(); err != nil { // created on first start
		return nil, err
	}
	var opts component.Options
	components := manager.Components()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	component.BindFlags(fs, &opts, components)
	if err := fs.Parse(append(managerArgs(hub, hostsAddr), "--metrics-bind-address=0", "--health-addr=0")); err != nil {
		return nil, err
	}
	if err := component.Complete(&opts, components); err != nil {
		return nil, err
	}
	mgr, err := component.NewManager(ctx, hub.RESTConfig(), manager.Name, opts, components)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	started := mgr.GetWebhookServer().StartedChecker()
	for started(nil) != nil {
		select {
		case err := <-done:
			return nil, fmt.Errorf("the manager stopped during start: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := hub.RegisterWebhooks(ctx); err != nil {
		return nil, err
	}
	return done, nil
}

// prepareForExternalManager readies a hub whose manager runs elsewhere:
// the signing key it will need, and the webhook configurations pointing at
// the hub's webhook port, where that manager must serve them.
func prepareForExternalManager(ctx context.Context, hub *localcp.Hub) error {
	if _, err := hub.SigningKey(); err != nil {
		return err
	}
	return hub.RegisterWebhooks(ctx)
}

func printReady(out io.Writer, hub *localcp.Hub, took time.Duration, controllers bool, hostsAddr string) {
	fmt.Fprintf(out, "Hub is ready in %s at %s\n", took.Round(100*time.Millisecond), hub.Server())
	fmt.Fprintf(out, "  kubectl --kubeconfig %s get clusters -A\n", hub.Kubeconfig())
	if controllers {
		fmt.Fprintf(out, "  deploy server (hosts boot from it): %s, network boot (plain http for iPXE): %s/boot/by-mac/<mac>\n", deployURL(hub, hostsAddr), deployBootURL(hub, hostsAddr))
		fmt.Fprintf(out, "  ignition server (large machine configs): %s\n", hub.IgnitionServing().URL)
		fmt.Fprintf(out, "  agent service (InfraEnv discovery ISOs, agent-based installs): %s\n", agentServiceURL(hub, hostsAddr))
	} else {
		is := hub.IgnitionServing()
		fmt.Fprintf(out, "  No controllers run in the hub (--controllers=false). Run the manager (cmd/manager) against it;\n")
		fmt.Fprintf(out, "  the hub's webhooks call %s, hosts are sent to %s (deploy), %s (ignition) and %s (agent service):\n",
			hub.WebhookURL(), deployURL(hub, hostsAddr), is.URL, agentServiceURL(hub, hostsAddr))
		fmt.Fprintf(out, "    manager%s\n", shellArgs(append([]string{"--kubeconfig=" + hub.Kubeconfig()}, managerArgs(hub, hostsAddr)...)...))
		fmt.Fprintf(out, "  Replicas (--leader-elect) listen on ports of their own behind a load balancer on those four, with\n")
		fmt.Fprintf(out, "  --deploy-url=%s --ignition-url=%s --agent-service-url=%s; each its own --console-listen-address\n", deployURL(hub, hostsAddr), is.URL, agentServiceURL(hub, hostsAddr))
		fmt.Fprintf(out, "  (a console's sessions are its own: a load balancer in front of replicas' consoles keeps each browser on one).\n")
	}
	fmt.Fprintf(out, "  hosts verify these servers with the hub CA %s (their boot configuration carries it)\n", hub.CAFile())
	fmt.Fprintf(out, "  web console: https://%s (its certificate is from the hub CA), sign in with a token of the hub's admin:\n", hub.ConsoleAddr())
	fmt.Fprintf(out, "    kubectl --kubeconfig %s create token %s -n %s --duration 8h\n", hub.Kubeconfig(), consoleAdmin, consoleAdminNamespace)
	fmt.Fprintf(out, "  logs: %s\n", hub.LogDir())
	fmt.Fprintln(out, "Press Ctrl-C, or run `metalshift hub down --dir "+hub.Dir()+"`, to stop it.")
}

// The ServiceAccount whose tokens sign the hub's admin in to the console:
// bound to cluster-admin, as the admin kubeconfig is; only who holds that
// kubeconfig can create its tokens.
const (
	consoleAdmin          = "metalshift-console-admin"
	consoleAdminNamespace = "kube-system"
)

// ensureConsoleAdmin creates the console admin's ServiceAccount and its
// binding to cluster-admin, when missing.
func ensureConsoleAdmin(ctx context.Context, hub *localcp.Hub) error {
	cs, err := kubernetes.NewForConfig(hub.RESTConfig())
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: consoleAdminNamespace, Name: consoleAdmin}}
	if _, err := cs.CoreV1().ServiceAccounts(consoleAdminNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the console admin's ServiceAccount: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: consoleAdmin},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: consoleAdminNamespace, Name: consoleAdmin}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the console admin to cluster-admin: %w", err)
	}
	return nil
}

// deployURL is how hosts reach the hub's deploy server (https).
func deployURL(hub *localcp.Hub, hostsAddr string) string {
	_, port, _ := net.SplitHostPort(hub.DeployAddr())
	return "https://" + net.JoinHostPort(hostsAddr, port)
}

// deployBootURL is how network-booting firmware reaches the deploy
// server's plain http (iPXE cannot be given the hub CA).
func deployBootURL(hub *localcp.Hub, hostsAddr string) string {
	_, port, _ := net.SplitHostPort(hub.DeployBootAddr())
	return "http://" + net.JoinHostPort(hostsAddr, port)
}

// agentServiceURL is how hosts reach the hub's agent service (https): the
// base of the InfraEnvs' discovery ISO URLs and of the agents' REST API.
func agentServiceURL(hub *localcp.Hub, hostsAddr string) string {
	_, port, _ := net.SplitHostPort(hub.AgentServiceAddr())
	return "https://" + net.JoinHostPort(hostsAddr, port)
}

// managerArgs is the command line of the manager (cmd/manager) that
// serves hub, without --kubeconfig: its webhooks, deploy and ignition
// servers and agent service where the hub sends the kube-apiserver and the
// hosts. `hub up` runs its manager in-process with the same flags.
func managerArgs(hub *localcp.Hub, hostsAddr string) []string {
	ws, is := hub.WebhookServing(), hub.IgnitionServing()
	deployCert, deployKey := hub.ServingCert(localcp.DeployServerCert)
	serviceCert, serviceKey := hub.ServingCert(localcp.AgentServiceCert)
	consoleCert, consoleKey := hub.ServingCert(localcp.ConsoleCert)
	args := []string{
		"--webhook-host=" + ws.Host, "--webhook-port=" + strconv.Itoa(ws.Port), "--webhook-cert-dir=" + ws.CertDir,
		"--webhook-cert-name=" + ws.CertName, "--webhook-key-name=" + ws.KeyName,
		"--deploy-listen-address=" + hub.DeployAddr(), "--deploy-url=" + deployURL(hub, hostsAddr),
		"--deploy-cert-file=" + deployCert, "--deploy-key-file=" + deployKey, "--deploy-ca-file=" + hub.CAFile(),
		"--deploy-boot-listen-address=" + hub.DeployBootAddr(), "--deploy-boot-url=" + deployBootURL(hub, hostsAddr),
		// Equinix Metal devices (of metalshift sim equinix) boot from it too.
		"--equinix-boot-url=" + deployBootURL(hub, hostsAddr),
		"--ignition-listen-address=" + is.Addr, "--ignition-cert-file=" + is.CertFile, "--ignition-key-file=" + is.KeyFile,
		"--ignition-ca-file=" + hub.CAFile(), "--signing-key-file=" + hub.SigningKeyFile(),
		"--agent-service-listen-address=" + hub.AgentServiceAddr(), "--agent-service-url=" + agentServiceURL(hub, hostsAddr),
		"--agent-service-cert-file=" + serviceCert, "--agent-service-key-file=" + serviceKey, "--agent-service-ca-file=" + hub.CAFile(),
		"--console-listen-address=" + hub.ConsoleAddr(), "--console-cert-file=" + consoleCert, "--console-key-file=" + consoleKey,
		// Converged-flow discovery images carry the deploy server's URL and CA.
		"--agent-service-deploy-url=" + deployURL(hub, hostsAddr), "--agent-service-deploy-ca-file=" + hub.CAFile(),
		// Installed clusters come up while the hub watches: connect soon after.
		"--workload-connection-retry-interval=2s",
		// The lab's simulated BMCs (metalshift sim bmc) listen on loopback,
		// which a production hub refuses.
		"--bmc-allow-loopback",
	}
	// Real machines boot the live images when `make images` built them
	// (make exports their directory); simulated ones boot either.
	if dir := os.Getenv("METALSHIFT_IMAGES_DIR"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, imageservice.LiveISOFile)); err == nil {
			args = append(args, "--live-image-dir="+dir)
		}
	}
	return args
}

func (o *hubOptions) status(ctx context.Context, out io.Writer, wait time.Duration) error {
	var (
		s   localcp.Status
		err error
	)
	if wait > 0 {
		s, err = localcp.WaitReady(ctx, o.dir, wait)
	} else {
		s, err = localcp.GetStatus(o.dir)
	}
	if s.Dir == "" {
		return err
	}
	fmt.Fprintf(out, "Directory:  %s\nPhase:      %s\n", s.Dir, s.State.Phase)
	if s.Running {
		fmt.Fprintf(out, "PID:        %d\nServer:     %s\nKubeconfig: %s\nDeploy:     https://127.0.0.1:%d (network boot: http://127.0.0.1:%d)\nIgnition:   https://127.0.0.1:%d\nAgent API:  https://127.0.0.1:%d\nHub CA:     %s\nSince:      %s\n",
			s.State.PID, s.State.Server, s.Kubeconfig, s.State.Ports.Deploy, s.State.Ports.DeployBoot, s.State.Ports.Ignition, s.State.Ports.AgentService, localcp.CAPath(s.Dir),
			s.State.Since.Local().Format(time.RFC3339))
		if s.State.Ports.Console != 0 {
			fmt.Fprintf(out, "Console:    https://127.0.0.1:%d\n", s.State.Ports.Console)
		}
	}
	if err != nil {
		fmt.Fprintln(out, err)
	}
	if !s.Running || s.State.Phase != localcp.PhaseReady {
		return exitError{code: 1}
	}
	return nil
}

// setLogger sends the controllers' logs, and klog's, to logger.
func setLogger(logger logr.Logger) {
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}

// prefixed writes each write to w with a prefix; progress lines are whole lines.
func prefixed(w io.Writer, prefix string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if _, err := io.WriteString(w, prefix); err != nil {
			return 0, err
		}
		return w.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// shellArgs joins args for a shell, each after a space, quoting those with
// characters a shell would interpret.
func shellArgs(args ...string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteByte(' ')
		if strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
			b.WriteString(a)
		} else {
			b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
		}
	}
	return b.String()
}

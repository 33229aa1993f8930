package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Workloads run on an installed cluster's simulated nodes as kwok runs
// them: kube-controller-manager turns Deployments into ReplicaSets and Pods,
// the cluster's scheduler (schedule) binds each Pod to a Ready node whose
// labels match its nodeSelector, and that node's kubelet (runPods) reports
// it Running with the node's address. A container whose image the world's
// Runtime runs is started for real; its Pod is Ready once the container's
// readiness probe answers. Any other container runs without a process and
// is Ready at once. The simulated machines' addresses are not this host's,
// and the simulated network has no pod network: every Pod's address is its
// cluster's API address, where its containers listen (with distinct ports,
// as the payload's do); its host address is its node's.

// Runtime is the container runtime of the simulated nodes for the images it
// knows: metalshift's own, whose containers run for real (the bare-metal
// operator in the installed clusters).
type Runtime interface {
	// Runs tells whether the runtime runs containers of image.
	Runs(image string) bool
	// Run runs the container until ctx is done; an error ends it as a
	// failed container, which the kubelet starts again.
	Run(ctx context.Context, c Container) error
}

// Container is a container as the kubelet hands it to the runtime: its
// arguments expanded ($(VAR) from its environment), the paths where volumes
// are mounted replaced by the directories the kubelet wrote them to, and
// listen addresses without a host (":9443") bound to the Pod's address.
type Container struct {
	// Namespace and Pod name the Pod; Name the container.
	Namespace, Pod, Name string
	Image                string
	Command, Args        []string
	// Env is the container's environment, NAME=value.
	Env []string
	// Config reaches the cluster's API with the Pod's service account's
	// token, as a Pod's in-cluster configuration does.
	Config *rest.Config
}

// podPoll is how often a kubelet looks at its Pods.
const podPoll = time.Second

// runPods is a kubelet's Pod loop: it runs the Pods bound to its node until
// ctx is done, then stops their containers.
func (w *World) runPods(ctx context.Context, cl *Cluster, c client.Client, node, ip, id string) {
	k := &podKubelet{w: w, cl: cl, c: c, node: node, ip: ip, id: id, running: map[string]*container{}}
	defer k.stopAll()
	for {
		if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			w.opts.Logf("%s: kubelet: pods: %v", id, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(podPoll):
		}
	}
}

// podKubelet is one node's kubelet, as far as Pods go.
type podKubelet struct {
	w            *World
	cl           *Cluster
	c            client.Client
	node, ip, id string
	// running are the containers started, by Pod UID and container name.
	mu      sync.Mutex
	running map[string]*container
}

// container is a running container of the runtime.
type container struct {
	cancel   context.CancelFunc
	dir      string
	probe    *corev1.Probe
	ports    []corev1.ContainerPort
	restarts int32
	started  metav1.Time
	// exited is closed when Run returns; err is its error.
	exited chan struct{}
	err    error
}

func (k *podKubelet) sync(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := k.c.List(ctx, pods, client.MatchingFields{"spec.nodeName": k.node}); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			k.stopPod(pod)
			// The kubelet confirms the deletion once its containers stopped.
			if err := k.c.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				k.w.opts.Logf("%s: kubelet: deleting pod %s/%s: %v", k.id, pod.Namespace, pod.Name, err)
			}
			continue
		}
		for _, ctr := range pod.Spec.Containers {
			seen[string(pod.UID)+"/"+ctr.Name] = true
		}
		if err := k.syncPod(ctx, pod); err != nil && ctx.Err() == nil {
			k.w.opts.Logf("%s: kubelet: pod %s/%s: %v", k.id, pod.Namespace, pod.Name, err)
		}
	}
	// Containers of Pods that are gone.
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, ctr := range k.running {
		if !seen[key] {
			ctr.stop()
			delete(k.running, key)
		}
	}
	return nil
}

// syncPod starts the Pod's containers the runtime runs and posts the Pod's
// status.
func (k *podKubelet) syncPod(ctx context.Context, pod *corev1.Pod) error {
	now := metav1.Now()
	want := pod.Status.DeepCopy()
	want.Phase = corev1.PodRunning
	want.HostIP, want.PodIP = k.ip, k.cl.vip
	want.HostIPs, want.PodIPs = []corev1.HostIP{{IP: k.ip}}, []corev1.PodIP{{IP: k.cl.vip}}
	if want.StartTime == nil {
		want.StartTime = &now
	}
	allReady := true
	statuses := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, spec := range pod.Spec.Containers {
		st := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: spec.Image, Started: ptr.To(true)}
		ready := true
		if k.w.opts.Runtime != nil && k.w.opts.Runtime.Runs(spec.Image) {
			ctr, err := k.start(ctx, pod, spec)
			switch {
			case err != nil:
				ready = false
				st.Started = ptr.To(false)
				st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating", Message: err.Error()}
			default:
				ready = ctr.ready(k.cl.vip)
				st.RestartCount = ctr.restarts
				st.State.Running = &corev1.ContainerStateRunning{StartedAt: ctr.started}
			}
		} else {
			started := now
			for _, old := range pod.Status.ContainerStatuses {
				if old.Name == spec.Name && old.State.Running != nil {
					started = old.State.Running.StartedAt
				}
			}
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
		}
		st.Ready = ready
		allReady = allReady && ready
		statuses = append(statuses, st)
	}
	want.ContainerStatuses = statuses
	cond := func(t corev1.PodConditionType, ok bool) {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
		}
		for i := range want.Conditions {
			if want.Conditions[i].Type == t {
				if want.Conditions[i].Status != status {
					want.Conditions[i].Status, want.Conditions[i].LastTransitionTime = status, now
				}
				return
			}
		}
		want.Conditions = append(want.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: now})
	}
	cond(corev1.PodInitialized, true)
	cond(corev1.PodScheduled, true)
	cond(corev1.ContainersReady, allReady)
	cond(corev1.PodReady, allReady)
	if apiequality.Semantic.DeepEqual(want, &pod.Status) {
		return nil
	}
	pod.Status = *want
	return k.c.Status().Update(ctx, pod)
}

// start returns the Pod's running container, starting it (again, once it
// exited) with its volumes written out and a token of the Pod's service
// account.
func (k *podKubelet) start(ctx context.Context, pod *corev1.Pod, spec corev1.Container) (*container, error) {
	key := string(pod.UID) + "/" + spec.Name
	k.mu.Lock()
	ctr := k.running[key]
	k.mu.Unlock()
	if ctr != nil {
		select {
		case <-ctr.exited:
			k.w.opts.Logf("%s: kubelet: container %s of pod %s/%s exited: %v; restarting", k.id, spec.Name, pod.Namespace, pod.Name, ctr.err)
		default:
			return ctr, nil
		}
	}
	dir := filepath.Join(k.cl.dir, "pods", string(pod.UID))
	mounts, err := k.writeVolumes(ctx, pod, spec, dir)
	if err != nil {
		return nil, err
	}
	cfg, err := k.serviceAccountConfig(ctx, pod)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	var envList []string
	for _, e := range spec.Env {
		v, err := k.envValue(pod, e)
		if err != nil {
			return nil, err
		}
		env[e.Name] = v
		envList = append(envList, e.Name+"="+v)
	}
	translate := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			a = expand(a, env)
			for from, to := range mounts {
				a = strings.ReplaceAll(a, from, to)
			}
			out[i] = bindTo(a, k.cl.vip)
		}
		return out
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	next := &container{cancel: cancel, dir: dir, probe: spec.ReadinessProbe, ports: spec.Ports, started: metav1.Now(), exited: make(chan struct{})}
	if ctr != nil {
		next.restarts = ctr.restarts + 1
	}
	run := Container{Namespace: pod.Namespace, Pod: pod.Name, Name: spec.Name, Image: spec.Image,
		Command: translate(spec.Command), Args: translate(spec.Args), Env: envList, Config: cfg}
	go func() {
		defer close(next.exited)
		next.err = k.w.opts.Runtime.Run(runCtx, run)
		if next.err == nil && runCtx.Err() == nil {
			next.err = fmt.Errorf("container %s exited", spec.Name)
		}
	}()
	k.mu.Lock()
	k.running[key] = next
	k.mu.Unlock()
	k.w.opts.Logf("%s: kubelet: started container %s of pod %s/%s (%s)", k.id, spec.Name, pod.Namespace, pod.Name, spec.Image)
	return next, nil
}

// writeVolumes writes the Secret and ConfigMap volumes the container
// mounts under dir; it returns mount path → directory.
func (k *podKubelet) writeVolumes(ctx context.Context, pod *corev1.Pod, spec corev1.Container, dir string) (map[string]string, error) {
	mounts := map[string]string{}
	for _, m := range spec.VolumeMounts {
		var vol *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == m.Name {
				vol = &pod.Spec.Volumes[i]
			}
		}
		if vol == nil {
			return nil, fmt.Errorf("volume %s is not in the pod", m.Name)
		}
		files := map[string][]byte{}
		switch {
		case vol.Secret != nil:
			s := &corev1.Secret{}
			if err := k.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: vol.Secret.SecretName}, s); err != nil {
				return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", m.Name, err)
			}
			for n, v := range s.Data {
				files[n] = v
			}
		case vol.ConfigMap != nil:
			cm := &corev1.ConfigMap{}
			if err := k.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: vol.ConfigMap.Name}, cm); err != nil {
				return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", m.Name, err)
			}
			for n, v := range cm.Data {
				files[n] = []byte(v)
			}
		default:
			continue // projected service account tokens and the like: the runtime gets Config
		}
		vdir := filepath.Join(dir, "volumes", m.Name)
		if err := os.MkdirAll(vdir, 0o700); err != nil {
			return nil, err
		}
		for n, v := range files {
			if err := os.WriteFile(filepath.Join(vdir, n), v, 0o600); err != nil {
				return nil, err
			}
		}
		mounts[strings.TrimSuffix(m.MountPath, "/")] = vdir
	}
	return mounts, nil
}

// serviceAccountConfig is the Pod's in-cluster configuration: the
// cluster's internal API name and a token of its service account, bound to
// the Pod (the kubelet may ask for one only for a Pod on its node).
func (k *podKubelet) serviceAccountConfig(ctx context.Context, pod *corev1.Pod) (*rest.Config, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](24 * 3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: sa}}
	if err := k.c.SubResource("token").Create(ctx, account, tr); err != nil {
		return nil, fmt.Errorf("a token of service account %s/%s: %w", pod.Namespace, sa, err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(k.cl.names[1], strconv.Itoa(APIPort)),
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.cl.files.ca.Cert},
		Dial:            k.w.DialContext,
	}, nil
}

// envValue is an environment variable's value; of the references, those to
// the Pod's own fields.
func (k *podKubelet) envValue(pod *corev1.Pod, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	if f := e.ValueFrom.FieldRef; f != nil {
		switch f.FieldPath {
		case "status.hostIP":
			return k.ip, nil
		case "status.podIP":
			return k.cl.vip, nil
		case "spec.nodeName":
			return k.node, nil
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		}
		return "", fmt.Errorf("env %s: field %s is not supported by the simulated kubelet", e.Name, f.FieldPath)
	}
	return "", fmt.Errorf("env %s: only values and field references are supported by the simulated kubelet", e.Name)
}

// expand replaces $(VAR) with the container's environment, as the kubelet
// does in command and args; an unknown reference stays as written.
func expand(s string, env map[string]string) string {
	for name, v := range env {
		s = strings.ReplaceAll(s, "$("+name+")", v)
	}
	return s
}

// bindTo binds a flag's listen address without a host
// ("--x-address=:8080") to ip.
func bindTo(arg, ip string) string {
	name, value, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasPrefix(value, ":") || !strings.HasPrefix(name, "--") {
		return arg
	}
	if _, err := strconv.Atoi(value[1:]); err != nil {
		return arg
	}
	return name + "=" + net.JoinHostPort(ip, value[1:])
}

// ready probes the container's readiness: an HTTP GET on the Pod's address.
func (c *container) ready(ip string) bool {
	select {
	case <-c.exited:
		return false
	default:
	}
	if c.probe == nil || c.probe.HTTPGet == nil {
		return true
	}
	port := c.probe.HTTPGet.Port
	p := port.IntValue()
	if port.Type == intstr.String {
		for _, cp := range c.ports {
			if cp.Name == port.StrVal {
				p = int(cp.ContainerPort)
			}
		}
	}
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(p)) + c.probe.HTTPGet.Path)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

func (c *container) stop() {
	c.cancel()
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
	}
	_ = os.RemoveAll(c.dir)
}

func (k *podKubelet) stopPod(pod *corev1.Pod) {
	k.mu.Lock()
	var stop []*container
	for _, ctr := range pod.Spec.Containers {
		key := string(pod.UID) + "/" + ctr.Name
		if c := k.running[key]; c != nil {
			stop = append(stop, c)
			delete(k.running, key)
		}
	}
	k.mu.Unlock()
	for _, c := range stop {
		c.stop()
	}
}

func (k *podKubelet) stopAll() {
	k.mu.Lock()
	all := k.running
	k.running = map[string]*container{}
	k.mu.Unlock()
	for _, c := range all {
		c.stop()
	}
}

// schedule is the cluster's scheduler: it binds every Pod without a node to
// the Ready node, among those its nodeSelector matches, that runs the
// fewest Pods.
func (c *Cluster) schedule(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := c.client.List(ctx, pods); err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := c.client.List(ctx, nodes); err != nil {
		return err
	}
	load := map[string]int{}
	var pending []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != "" {
			load[p.Spec.NodeName]++
		} else if p.DeletionTimestamp == nil {
			pending = append(pending, p)
		}
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for _, p := range pending {
		var best string
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if !nodeReady(n) || n.Spec.Unschedulable || !matches(p.Spec.NodeSelector, n.Labels) {
				continue
			}
			if best == "" || load[n.Name] < load[best] {
				best = n.Name
			}
		}
		if best == "" {
			continue // it waits, as an unschedulable Pod does
		}
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: best}}
		if err := c.client.SubResource("binding").Create(ctx, p, binding); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("binding pod %s/%s to %s: %w", p.Namespace, p.Name, best, err)
		}
		load[best]++
	}
	return nil
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

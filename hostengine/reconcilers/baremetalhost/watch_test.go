package baremetalhost_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// TestWatcherSeesEveryState: a user watching a host (`kubectl get bmh -w`)
// sees every provisioning state it passes through, in order, each in a
// status write of its own, also when the host has an image from the start
// and nothing stops it on the way; each change has its StateChanged Event.
// A reconcile that passed through several states in one write would hide
// the states in between from the watcher.
func TestWatcherSeesEveryState(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	img := newImageServer(t, 1<<20, false)

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	list := &metal3v1.BareMetalHostList{}
	g.Expect(wc.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	// From the list's resourceVersion on, the watch has every write.
	w, err := wc.Watch(ctx, &metal3v1.BareMetalHostList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image = img.Image()
		h.Spec.Online = true
	})
	waitState(t, host, metal3v1.StateProvisioned)

	want := []metal3v1.ProvisioningState{metal3v1.StateRegistering, metal3v1.StateInspecting, metal3v1.StatePreparing,
		metal3v1.StateAvailable, metal3v1.StateProvisioning, metal3v1.StateProvisioned}
	seen := watchedStates(t, w, host.Name, metal3v1.StateProvisioned)
	g.Expect(seen).To(Equal(want), "the states a watcher of the host saw, in order")

	// One StateChanged Event a change, naming the state left and the one entered.
	var notes []string
	from := "new"
	for _, s := range want {
		notes = append(notes, fmt.Sprintf("Host went from %q to %q", from, s))
		from = string(s)
	}
	g.Eventually(func(g Gomega) {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		var got []string
		for _, ev := range evs.Items {
			if ev.Reason == "StateChanged" && ev.Regarding.Name == host.Name {
				got = append(got, ev.Note)
			}
		}
		g.Expect(got).To(ConsistOf(notes))
	}).Should(Succeed())
}

// watchedStates reads w's events about the host name until it is seen in
// state last, and returns the states seen, each once as long as it lasts.
// The host is already in state last: the watch holds every write up to it.
func watchedStates(t *testing.T, w watch.Interface, name string, last metal3v1.ProvisioningState) []metal3v1.ProvisioningState {
	t.Helper()
	var seen []metal3v1.ProvisioningState
	giveUp := time.After(time.Minute)
	for len(seen) == 0 || seen[len(seen)-1] != last {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("The watch ended after states %v", seen)
			}
			if ev.Type == watch.Error {
				t.Fatalf("The watch failed after states %v: %v", seen, ev.Object)
			}
			h, isHost := ev.Object.(*metal3v1.BareMetalHost)
			if !isHost || h.Name != name {
				continue
			}
			if s := h.Status.Provisioning.State; s != metal3v1.StateNone && (len(seen) == 0 || seen[len(seen)-1] != s) {
				seen = append(seen, s)
			}
		case <-giveUp:
			t.Fatalf("The watch did not show state %s; it showed %v", last, seen)
		}
	}
	return seen
}

package testenv

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// RequireChaos skips a test of `make chaos` unless METALSHIFT_CHAOS is set:
// the long fault runs stay out of `make test`.
func RequireChaos(t testing.TB) {
	t.Helper()
	if os.Getenv("METALSHIFT_CHAOS") == "" {
		t.Skip("a fault test of make chaos (METALSHIFT_CHAOS=1)")
	}
}

// ChaosRow is one scenario's line of the `make chaos` report.
type ChaosRow struct {
	Scenario string
	// Runs started and Completed (every install of the run finished).
	Runs, Completed int
	// Took is the faulted runs' mean time; FaultFree the same install
	// without faults, measured in the same test (0: not measured).
	Took, FaultFree time.Duration
	// Faults is how many faults fired (kills, failed BMC requests, ...),
	// summed over the runs.
	Faults int
	// Orphans and DoubleWrites found, summed over the runs.
	Orphans, DoubleWrites int
	// BMCTrouble is how many hosts had a condition naming BMC trouble,
	// cleared by the end of their run, summed over the runs.
	BMCTrouble int
	// Seeds of the runs that failed ("-" when none did), or of every run.
	Seeds []string
}

// ChaosReportHeader is the report's first line, tab-separated as the rows.
const ChaosReportHeader = "scenario\truns\tcompleted\ttime\tfault-free\tratio\tfaults\thosts-bmc-trouble-cleared\torphans\tdisks-written-twice\tseeds"

func (r ChaosRow) String() string {
	ratio, free := "-", "-"
	if r.FaultFree > 0 {
		free = r.FaultFree.Round(100 * time.Millisecond).String()
		ratio = fmt.Sprintf("%.2f", r.Took.Seconds()/r.FaultFree.Seconds())
	}
	seeds := strings.Join(r.Seeds, ",")
	if seeds == "" {
		seeds = "-"
	}
	return fmt.Sprintf("%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s", r.Scenario, r.Runs, r.Completed, r.Took.Round(100*time.Millisecond),
		free, ratio, r.Faults, r.BMCTrouble, r.Orphans, r.DoubleWrites, seeds)
}

var reportMu sync.Mutex

// ReportChaos logs the row and appends it to the file METALSHIFT_CHAOS_REPORT
// names (when set), which `make chaos` prints as a table at the end.
func ReportChaos(t testing.TB, row ChaosRow) {
	t.Helper()
	t.Logf("chaos report:\n%s\n%s", ChaosReportHeader, row)
	path := os.Getenv("METALSHIFT_CHAOS_REPORT")
	if path == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	// The first writer (of every test process of the run) writes the header.
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		_, _ = fmt.Fprintln(f, ChaosReportHeader)
		_ = f.Close()
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Errorf("writing the chaos report: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, row); err != nil {
		t.Errorf("writing the chaos report: %v", err)
	}
}

// Orphans lists the objects of namespace ns whose owner references name an
// object that does not exist (or exists with another UID): what a
// controller killed at the wrong moment, or a finalizer that let go too
// early, leaves behind. Every listable namespaced kind the API serves is
// read, as metadata only.
func Orphans(ctx context.Context, cfg *rest.Config, ns string) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	// resource of each group/kind, to look owners up.
	resources := map[schema.GroupKind]schema.GroupVersionResource{}
	var all []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			resources[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = gvr
			all = append(all, gvr)
		}
	}
	var orphans []string
	for _, gvr := range all {
		objs, err := mc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // a kind this user may not list, or one being removed
		}
		for _, o := range objs.Items {
			for _, ref := range o.OwnerReferences {
				gv, _ := schema.ParseGroupVersion(ref.APIVersion)
				rgvr, known := resources[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
				if !known {
					continue // a cluster-scoped owner
				}
				owner, err := mc.Resource(rgvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					orphans = append(orphans, fmt.Sprintf("%s %s: its owner %s %s is gone", gvr.Resource, o.Name, ref.Kind, ref.Name))
				case err != nil:
					return nil, err
				case owner.UID != ref.UID:
					orphans = append(orphans, fmt.Sprintf("%s %s: its owner %s %s is another object of that name", gvr.Resource, o.Name, ref.Kind, ref.Name))
				}
			}
		}
	}
	return orphans, nil
}

// diskWrite is a simulated machine's console line saying its deploy agent
// writes an image: "<host>: Writing <image> to <disk> for request <generation>".
var diskWrite = regexp.MustCompile(`(?m)^(\S+): Writing \S+ to (\S+) for request (\S+)$`)

// DiskWrites reads the simulator's console (sim bmc --console) and returns
// the disks written per "<host> <request>".
func DiskWrites(console string) map[string][]string {
	writes := map[string][]string{}
	for _, m := range diskWrite.FindAllStringSubmatch(console, -1) {
		writes[m[1]+" "+m[3]] = append(writes[m[1]+" "+m[3]], m[2])
	}
	return writes
}

// WrittenTwice lists the "<host> <request>" whose disk the console shows
// written more than once: a request's image must be written at most once,
// whatever was killed or failed meanwhile.
func WrittenTwice(writes map[string][]string) []string {
	var twice []string
	for req, disks := range writes {
		if len(disks) > 1 {
			twice = append(twice, fmt.Sprintf("%s: %s", req, strings.Join(disks, ", ")))
		}
	}
	slices.Sort(twice)
	return twice
}

package agentclassification

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

func inventory(t *testing.T, cpus, memGiB int64) any {
	t.Helper()
	v, err := Inventory(&agentinstallv1.HardwareInventory{
		Hostname: "h", Cpu: agentinstallv1.HostCPU{Count: cpus}, Memory: agentinstallv1.HostMemory{PhysicalBytes: memGiB << 30},
		Disks: []agentinstallv1.HostDisk{{ID: "/dev/sda", SizeBytes: 120 << 30, InstallationEligibility: agentinstallv1.HostInstallationEligibility{Eligible: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    bool
		wantErr string
	}{
		{name: "true", query: ".cpu.count == 4 and .memory.physicalBytes >= 17179869184", want: true},
		{name: "false", query: ".cpu.count > 4"},
		{name: "camelCase keys of the CR", query: `.disks[0].installationEligibility.eligible and .disks[0].sizeBytes > 100000000000`, want: true},
		{name: "empty fields are left out", query: ".bmcAddress == null and (.interfaces | length) == 0", want: true},
		{name: "one value not a boolean", query: ".cpu.count"},
		{name: "null", query: ".nothing"},
		{name: "no value", query: "empty", wantErr: "Expected boolean, found no values"},
		{name: "several values", query: "true, true", wantErr: "Expected boolean, found multiple values"},
		{name: "an error", query: ".cpu.count & .memory", wantErr: "unexpected token"},
		{name: "a runtime error", query: `.hostname | tonumber`, wantErr: "invalid number"},
		{name: "error after the first value", query: `true, error("boom")`, wantErr: "boom"},
		{name: "empty query", query: "", wantErr: "missing query"},
		{name: "endless", query: "[repeat(1)]", wantErr: "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Match(context.Background(), tt.query, inventory(t, 4, 16))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestMatchWithoutInventory(t *testing.T) {
	g := NewWithT(t)
	v, err := Inventory(&agentinstallv1.HardwareInventory{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(map[string]any{"memory": map[string]any{}, "cpu": map[string]any{}, "boot": map[string]any{}, "systemVendor": map[string]any{}}),
		"the struct marshalled as upstream marshals it: empty structs stay")
	got, err := Match(context.Background(), ".cpu.count >= 4", v)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeFalse())
	_, err = Match(context.Background(), "[.disks[] | .sizeBytes] | max > 0", v)
	g.Expect(err).To(HaveOccurred(), "iterating a missing list fails, as upstream")
}

func classification(name, key, value, query string) agentinstallv1.AgentClassification {
	return agentinstallv1.AgentClassification{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: agentinstallv1.AgentClassificationSpec{LabelKey: key, LabelValue: value, Query: query}}
}

func TestClassify(t *testing.T) {
	const size = agentinstallv1.ClassificationLabelPrefix + "size"
	medium := classification("medium", "size", "medium", ".cpu.count == 2")
	large := classification("large", "size", "large", ".cpu.count == 4")
	broken := classification("broken", "size", "broken", ".cpu.count & .memory")
	deleted := classification("medium", "size", "medium", ".cpu.count == 4")
	now := metav1.Now()
	deleted.DeletionTimestamp = &now
	tests := []struct {
		name            string
		labels          map[string]string
		classifications []agentinstallv1.AgentClassification
		want            map[string]string
		changed         bool
	}{
		{name: "match sets the label", labels: map[string]string{"other": "x"}, classifications: []agentinstallv1.AgentClassification{large},
			want: map[string]string{"other": "x", size: "large"}, changed: true},
		{name: "already set", labels: map[string]string{size: "large"}, classifications: []agentinstallv1.AgentClassification{large},
			want: map[string]string{size: "large"}},
		{name: "no match removes its value", labels: map[string]string{size: "medium"}, classifications: []agentinstallv1.AgentClassification{medium},
			want: map[string]string{}, changed: true},
		{name: "no match keeps another value of the key", labels: map[string]string{size: "custom"}, classifications: []agentinstallv1.AgentClassification{medium},
			want: map[string]string{size: "custom"}},
		{name: "one of two of a key matches", labels: map[string]string{size: "medium"},
			classifications: []agentinstallv1.AgentClassification{large, medium},
			want:            map[string]string{size: "large"}, changed: true},
		{name: "failure sets QUERYERROR", labels: map[string]string{}, classifications: []agentinstallv1.AgentClassification{broken},
			want: map[string]string{size: "QUERYERROR-broken"}, changed: true},
		{name: "no match removes its QUERYERROR", labels: map[string]string{size: "QUERYERROR-medium"},
			classifications: []agentinstallv1.AgentClassification{medium},
			want:            map[string]string{}, changed: true},
		{name: "deleted classification removes its label even when matching", labels: map[string]string{size: "medium"},
			classifications: []agentinstallv1.AgentClassification{deleted},
			want:            map[string]string{}, changed: true},
		{name: "no classification", labels: map[string]string{size: "medium"}, want: map[string]string{size: "medium"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			changed := Classify(context.Background(), tt.labels, tt.classifications, inventory(t, 4, 16))
			g.Expect(tt.labels).To(Equal(tt.want))
			g.Expect(changed).To(Equal(tt.changed))
		})
	}
}

func TestCount(t *testing.T) {
	g := NewWithT(t)
	agent := func(labels map[string]string) agentinstallv1.Agent {
		return agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	const size = agentinstallv1.ClassificationLabelPrefix + "size"
	medium := classification("medium", "size", "medium", "true")
	matched, failed := Count([]agentinstallv1.Agent{
		agent(map[string]string{size: "medium"}),
		agent(map[string]string{size: "medium", "x": "y"}),
		agent(map[string]string{size: "QUERYERROR-medium"}),
		agent(map[string]string{size: "QUERYERROR-large"}), // counted, as upstream
		agent(map[string]string{size: "large"}),
		agent(map[string]string{agentinstallv1.ClassificationLabelPrefix + "other": "medium"}),
		agent(nil),
	}, &medium)
	g.Expect(matched).To(Equal(2))
	g.Expect(failed).To(Equal(2))
}

// FuzzMatch runs arbitrary queries, which users write, on an inventory: a
// query may fail, never panic or hang.
func FuzzMatch(f *testing.F) {
	for _, q := range []string{".cpu.count >= 4", "[.disks[] | select(.sizeBytes > 1)] | length > 0", "empty", "1,2", ".[", `"\(.)"`} {
		f.Add(q)
	}
	v, err := Inventory(&agentinstallv1.HardwareInventory{Hostname: "h", Cpu: agentinstallv1.HostCPU{Count: 4},
		Disks: []agentinstallv1.HostDisk{{ID: "d", SizeBytes: 1 << 30}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(_ *testing.T, query string) {
		_, _ = Match(context.Background(), query, v)
	})
}

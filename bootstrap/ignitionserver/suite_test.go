package ignitionserver

import (
	"context"
	"flag"
	"os"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts an API server, except for `go test -fuzz`: every fuzz
// worker runs TestMain, and the fuzz targets need none (fuzz with -run '^$').
func TestMain(m *testing.M) {
	flag.Parse()
	if fuzzing() {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

const config = `{"ignition":{"version":"3.4.0"}}`

// servedSecret creates a served config in a new namespace, controlled by
// an owner object as a bootstrap config controls it, and returns it with
// the owner's UID.
func servedSecret(t *testing.T) (*corev1.Secret, types.UID) {
	t.Helper()
	if env == nil {
		t.Skip("no API server while fuzzing")
	}
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}}
	g.Expect(env.Client.Create(ctx, owner)).To(Succeed())
	served := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg-ignition", Labels: map[string]string{ServedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Data: map[string][]byte{"value": []byte(config)},
	}
	g.Expect(env.Client.Create(ctx, served)).To(Succeed())
	return served, owner.UID
}

// countingClient counts the reads that reach the API.
type countingClient struct {
	client.Client
	gets atomic.Int32
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Client.Get(ctx, key, obj, opts...)
}

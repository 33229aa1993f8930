package webhooks_test

import (
	"os"
	"testing"

	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts envtest; the environment installs the provider's CRDs and
// serves and registers its webhooks, as the embedded hub does.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

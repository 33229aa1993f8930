package webhooks_test

import (
	"os"
	"testing"

	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts envtest; the environment serves and registers the
// BareMetalHost webhook as the embedded hub does.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

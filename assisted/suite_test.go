package assisted_test

import (
	"os"
	"testing"

	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts envtest, which installs every CRD of config, these
// groups' among them.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

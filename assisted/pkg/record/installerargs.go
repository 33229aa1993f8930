package record

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// InstallerFlags are the coreos-installer flags an Agent's installerArgs
// may carry (upstream's list, in its order: its messages print it).
var InstallerFlags = []string{"--append-karg", "--delete-karg", "-n", "--copy-network", "--network-dir",
	"--save-partlabel", "--save-partindex", "--image-url", "--image-file"}

// installerValueChars are the characters a flag's value may hold besides
// letters and digits, the same as upstream's: enough for kernel arguments,
// partition labels and indexes, paths and URLs; no white space, no '&',
// '|', '`', '>', '?', '\' or '~'.
const installerValueChars = `@!#$%*()_+,-./:;<="';{}[]`

// InstallerArgs parses an Agent's spec.installerArgs, a JSON array of
// strings, and checks it as upstream does: an argument starting with '-'
// is one of InstallerFlags, any other holds letters, digits and
// installerValueChars only. Its errors are the user's to fix (upstream's
// messages).
func InstallerArgs(a *agentinstallv1.Agent) ([]string, error) {
	if a.Spec.InstallerArgs == "" {
		return nil, nil
	}
	var args []string
	if err := json.Unmarshal([]byte(a.Spec.InstallerArgs), &args); err != nil {
		return nil, fmt.Errorf("Fail to unmarshal installer args for host %s in infraEnv %s: %w", a.Name, infraEnvID(a), err) //nolint:staticcheck // upstream's message
	}
	return args, CheckInstallerArgs(args)
}

// CheckInstallerArgs checks coreos-installer arguments (see InstallerArgs).
func CheckInstallerArgs(args []string) error {
	for _, arg := range args {
		if strings.HasPrefix(arg, "-") {
			if !slices.Contains(InstallerFlags, arg) {
				return fmt.Errorf("found unexpected flag %s for installer - allowed flags are %v", arg, InstallerFlags)
			}
			continue
		}
		if arg == "" || strings.IndexFunc(arg, badValueRune) >= 0 {
			return fmt.Errorf("found unexpected chars in value %s for installer", arg)
		}
	}
	return nil
}

func badValueRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune(installerValueChars, r)
}

// infraEnvID is the UID of the InfraEnv that owns a (its ID in the REST
// API), "" when none does.
func infraEnvID(a *agentinstallv1.Agent) string {
	for _, o := range a.OwnerReferences {
		if o.Kind == "InfraEnv" {
			return string(o.UID)
		}
	}
	return ""
}

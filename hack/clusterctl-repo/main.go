// Command clusterctl-repo writes metalshift's Cluster API providers as a
// clusterctl local repository (see docs/production.md):
//
//	go run ./hack/clusterctl-repo -out DIR -version v0.1.0 [-image REF]
//
// DIR/<provider>/<version>/ gets each provider's components YAML and
// metadata.yaml, and DIR/clusterctl.yaml names them for `clusterctl init
// --config`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/metalshift/metalshift/manager/providers"
)

func main() {
	out := flag.String("out", "", "Directory of the local repository (required)")
	version := flag.String("version", "", "Version of the providers, e.g. v0.1.0 (required)")
	image := flag.String("image", "", "Image of the manager (default "+providers.DefaultImage("<version>")+")")
	flag.Parse()
	if *out == "" || *version == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := providers.WriteRepository(*out, providers.Options{Version: *version, Image: *image}); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	fmt.Printf("Wrote metalshift's providers %s to %s; use it with: clusterctl init --config %s/clusterctl.yaml ...\n", *version, *out, *out)
}

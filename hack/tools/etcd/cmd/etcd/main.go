// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 so
// that it comes from the Go module proxy like every other tool.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

// Command hello stands in for an image's binary in ociimage's tests: it
// prints its arguments and the user it runs as.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Printf("hello from the image: %s (uid %d)\n", strings.Join(os.Args[1:], " "), os.Getuid())
}
